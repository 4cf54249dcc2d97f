"""Recorded cuDNN plans (`tokenizer.conv_kernels: plans`, `tokenizer.conv_plans_dir`): two fresh processes
replaying one plan book give the same bits, and replaying adds nothing to the book (docs/tokenizers.md: "after that
every process replays the recorded name"; BENCHMARKS.md: the same bits in a fresh process, the book replayed).

The book is timed and recorded here, by the same encode in this process; each replaying process is
`encode_with_plans.py` in a fresh interpreter. The encode: a wan2.1 bf16 tokenizer over random weights at the
released width (96), one 9x480x832 clip. Processes, not one process twice: a kernel chosen by timing or by
heuristics is chosen per process, which is what recording the plans makes reproducible.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from helpers.exec_world import cli_env
from helpers.media import pattern_frames
from helpers.random_wan import save_random_wan_vae
from latentforge.tokenizers.base import pixels_to_input
from latentforge.tokenizers.kernels.planned_convs import PYTORCH_PLAN

CHILD = Path(__file__).with_name("encode_with_plans.py")
WAN21 = dict(base_dim=96, decoder_base_dim=16)


def books(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.glob("*.json"))}


def test_fresh_processes_replaying_one_book_give_the_same_bits(cudnn_frontend, tmp_path, monkeypatch):
    from latentforge.tokenizers.wan.common import HEURISTICS_MODE_B_ENV
    from latentforge.tokenizers.wan.wan21 import Wan21Tokenizer

    _, checkpoint = save_random_wan_vae(tmp_path / "vae", WAN21)
    clip = tmp_path / "clip.pt"
    video = pixels_to_input(pattern_frames(9, 832, 480, seed=4), "cpu")[None]
    torch.save(video, clip)
    plans = tmp_path / "plans"
    monkeypatch.setenv(HEURISTICS_MODE_B_ENV, "1")  # what the tokenizer sets for its process, undone afterwards
    recording = Wan21Tokenizer(str(checkpoint), precision="bf16", device="cuda", conv_plans_dir=str(plans))
    recording.encode(video.cuda())
    recorded = books(plans)
    assert len(recorded) == 1, f"expected one book for this GPU and cuDNN, got {list(recorded)}"
    chosen = json.loads(next(iter(recorded.values())))
    assert any(name != PYTORCH_PLAN for name in chosen.values()), f"no cuDNN engine plan was chosen: {chosen}"
    latents = []
    for run in range(2):
        latent = tmp_path / f"latent-{run}.pt"
        done = subprocess.run([sys.executable, str(CHILD), str(checkpoint), str(clip), str(plans), str(latent)],
                              env=cli_env(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        latents.append(torch.load(latent))
    assert books(plans) == recorded, "a process replaying the book changed it"
    assert torch.equal(latents[0], latents[1]), "two processes replaying one book gave different bits"
