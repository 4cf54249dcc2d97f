"""The image-to-video preset on the GPU (docs/conditioning.md): `latentforge build --preset wan2.1-i2v-480p` on
three 9x64x64 clips, the Wan2.1 VAE at its released width and a CLIP ViT of the released architecture's kind
(transformers' CLIPVisionModel, 2 layers at 28x28), both with random weights, no text.

- The preset as it is (fp32 clip and fp32 conditioning): `verify --deep` re-encodes the clip, y and the image
  tokens of its spot samples bit for bit ("exact").
- The fast path (`--precision bf16`, `conditioning.precision=bf16`, recorded cuDNN plans) on two ranks and on one,
  the second given the first's book: the same SHA256SUMS, and `verify --deep` exact.
- y of the fp32 cache and of the bf16 one agree within the fast path's rel-L2 bound (2e-2).
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from helpers.exec_world import make_table, run_cli, sums
from helpers.random_wan import save_random_wan_vae

pytestmark = pytest.mark.slow  # whole builds in subprocesses

WAN21 = dict(base_dim=96, decoder_base_dim=16)
FRAMES, SIZE = 9, 64


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

    folder = tmp_path_factory.mktemp("i2v-gpu")
    table = make_table(folder / "world", count=3, frames=FRAMES, width=SIZE, height=SIZE)
    _, checkpoint = save_random_wan_vae(folder / "vae", WAN21)
    torch.manual_seed(3)
    clip = folder / "clip"
    CLIPVisionModel(CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                     patch_size=14, image_size=28, hidden_act="gelu")).save_pretrained(
        clip / "image_encoder")
    CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}).save_pretrained(
        clip / "image_processor")
    return folder, table, checkpoint, clip


def i2v_args(world, root: Path, *extra: str) -> list[str]:
    folder, table, checkpoint, clip = world
    return ["build", "--preset", "wan2.1-i2v-480p", "--reader", "table", "--dataset", str(table), "--out", str(root),
            "--tokenizer-checkpoint", str(checkpoint), "--text", "none", "--device", "cuda",
            "--workers-per-gpu", "0", "--quiet", "--set", "dataset.id_column=id",
            "--set", f"frames.num_frames={FRAMES}", "--set", f"frames.height={SIZE}", "--set", f"frames.width={SIZE}",
            "--set", "frames.fps=source", "--set", "output.unit_size=2", "--set", "output.rows_per_shard=4",
            "--set", "output.min_free_bytes=0", "--set", f"conditioning.image_encoder_path={clip}",
            "--set", f"tokenizer.conv_plans_dir={folder / 'shared-plans'}", *extra]


def deep_verify(root: Path) -> None:
    """`verify --deep` on the device it picks (the GPU): the clip and its conditioning re-encoded bit for bit.
    Random weights decode to noise, so the quality thresholds are opened: the re-encode is the point."""
    anything = ["--fail-psnr", "-1000", "--warn-psnr", "-1000", "--fail-ssim", "-1", "--warn-ssim", "-1"]
    report = root.parent / f"{root.name}-verify.json"
    done = run_cli(["verify", str(root), "--deep", "--spot", "2", "--report", str(report), *anything], timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["ok"] and result["comparison"].startswith("exact"), result["comparison"]
    assert result["environment"]["device_type"] == "cuda", result["environment"]
    checks = {check["name"]: check["detail"] for check in result["deep"]}
    for name in ("reencode", "conditioning"):
        assert "(2 bit for bit)" in checks[name], checks


def stored_y(root: Path) -> np.ndarray:
    return np.concatenate([h5py.File(p)["image_cond_latent"][:] for p in sorted((root / "shards").glob("*.h5"))])


def test_the_i2v_preset_builds_on_the_gpu_and_deep_verify_is_exact(cudnn_frontend, world):
    folder = world[0]
    exact = folder / "fp32"
    done = run_cli(i2v_args(world, exact), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    deep_verify(exact)

    fast_two, fast_one = folder / "bf16-two", folder / "bf16-one"
    fast = ["--precision", "bf16", "--set", "conditioning.precision=bf16"]
    done = run_cli(i2v_args(world, fast_two, *fast, "--procs", "2"), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    done = run_cli(i2v_args(world, fast_one, *fast, "--set",
                            f"tokenizer.conv_plans_file={fast_two / 'cache_config.json'}"), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sums(fast_one) == sums(fast_two), "the bf16 conditioning differs between one and two ranks"
    deep_verify(fast_two)

    y32, y16 = stored_y(exact).astype(np.float32), stored_y(fast_two).astype(np.float32)
    assert np.array_equal(y32[:, :4], y16[:, :4])  # the mask
    rel = np.linalg.norm(y16[:, 4:] - y32[:, 4:]) / np.linalg.norm(y32[:, 4:])
    assert 0 < rel < 2e-2, rel
