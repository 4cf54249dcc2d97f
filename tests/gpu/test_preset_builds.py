"""Each preset family built on the GPU with the preset's own defaults, then `verify --deep` on the GPU: every
re-encode exact (random weights decode to noise, so only the reconstruction-quality thresholds are opened).

- `openvid-perception-stage1` at its shape (93x480x832, mask, depth, T5 of width 1024) from a table that lists one
  video twice with its own ids and captions (more rows than clips), deep-verified through the build's plan and
  through the table again (`--dataset`).
- `cosmos-predict2-480p` at its shape (93x432x768) twice, in fresh processes with empty plan folders: every plan
  comes from the book shipped for the H200 (no plan chosen on the machine, no note saying so), and the two caches
  are the same bytes.
Run it alone (`-n 0`): the tests share one module world, and the full-size ones are minutes each.
- `wan2.2-ti2v-5b` (fp32, umT5 of width 4096), `cosmos-predict1-diffusion` (CV8x8x8, bf16) and
  `cosmos-predict1-autoregressive` (DV8x16x16 token ids, bf16) at reduced sizes that keep their code paths.
  (`wan2.1-i2v-480p`: test_i2v_build.py.)

The world is bench/build/_build_data.py's (the demo's shapes rendered at 832x480, H.264, PNG masks, float depth).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from helpers import REPO
from helpers.exec_world import run_cli, sums
from helpers.random_wan import save_random_wan_vae
from latentforge.demo.tiny_text_model import make_tiny_t5, make_tiny_umt5
from latentforge.demo.tiny_tokenizer import save_hub_folder, seeded_weights
from latentforge.tokenizers.cosmos.architecture import released
from latentforge.tokenizers.cosmos.model import CosmosVideoAutoencoder
from latentforge.tokenizers.wan import wan22_checkpoint

pytestmark = pytest.mark.slow  # whole builds in subprocesses

sys.path.insert(0, str(REPO / "bench" / "build"))
from _build_data import DatasetSpec, make_dataset  # noqa: E402 - bench/ is not a package

WAN21 = dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
             temperal_downsample=[False, True, True])  # the released Wan2.1 encoder (decoder too)
OPEN = ["--fail-psnr", "-1000", "--warn-psnr", "-1000", "--fail-ssim", "-1", "--warn-ssim", "-1"]
UNSHIPPED_NOTE = "are in no plan book shipped"


class World(dict):
    """The shared inputs, each made on first use (the Wan2.2 VAE and the umT5 only for the test that needs them)."""

    def __init__(self, folder: Path):
        super().__init__(folder=folder)
        self.table = make_dataset(folder / "data", DatasetSpec(clips=2, rows=3, width=832, height=480, frames=93,
                                                               grain=0), processes=2)
        self.captions = [line.split(",")[2] for line in self.table.read_text().splitlines()[1:]]
        self["table"] = self.table

    def __missing__(self, name: str) -> Path:
        folder = self["folder"]
        makers = {
            "wan21": lambda: save_random_wan_vae(folder / "wan21", WAN21)[1],
            "wan22": lambda: save_random_wan_vae(folder / "wan22", wan22_checkpoint.diffusers_config(160, 16))[1],
            "t5": lambda: make_tiny_t5(folder / "t5", d_model=1024, corpus=self.captions * 4),
            "umt5": lambda: make_tiny_umt5(folder / "umt5", d_model=4096, corpus=self.captions * 4),
        }
        self[name] = makers[name]()
        return self[name]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("presets-gpu"))


def build(world, preset: str, root: Path, checkpoint: str, text: str, *extra: str, plans: str | None = "plans"):
    """`latentforge build --preset PRESET --gpus all` of the world's table (a build runs on the CPU unless told
    otherwise); `plans` names the Wan tokenizers' plan folder."""
    folder = ["--set", f"tokenizer.conv_plans_dir={world['folder'] / plans}"] if plans else []
    done = run_cli(["build", "--preset", preset, "--dataset", str(world["table"]), "--set", "dataset.reader=table",
                    "--tokenizer-checkpoint", checkpoint, "--text-path", str(world[text]), "--out", str(root),
                    "--quiet", "--set", "output.min_free_bytes=0", "--gpus", "all", "--workers-per-gpu", "2", *folder,
                    *extra],
                   timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def deep_verify(root: Path, *extra: str) -> dict:
    report = root.parent / f"{root.name}-verify-{len(extra)}.json"
    done = run_cli(["verify", str(root), "--deep", "--spot", "2", "--report", str(report), *OPEN, *extra],
                   timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["ok"] and result["comparison"].startswith("exact"), result["comparison"]
    assert result["environment"]["device_type"] == "cuda", result["environment"]
    return result


def test_the_wan22_ti2v_preset_deep_verifies(world):
    root = world["folder"] / "ti2v"
    build(world, "wan2.2-ti2v-5b", root, str(world["wan22"]), "umt5", "--set", "frames.num_frames=9",
          "--set", "frames.height=64", "--set", "frames.width=64")
    deep_verify(root)


@pytest.mark.parametrize("preset, family, temporal, spatial, frames", [
    ("cosmos-predict1-diffusion", "CV", 8, 8, 17), ("cosmos-predict1-autoregressive", "DV", 8, 16, 17)])
def test_the_cosmos_presets_deep_verify(world, preset, family, temporal, spatial, frames):
    model = seeded_weights(CosmosVideoAutoencoder(
        released(family, temporal, spatial).narrowed(2, (2, 4, 4), 1, 16)).eval(), seed=5)
    checkpoint = save_hub_folder(world["folder"] / f"Cosmos-Tokenizer-{family}{temporal}x{spatial}x{spatial}", model)
    root = world["folder"] / preset
    build(world, preset, root, str(checkpoint), "t5", "--set", f"frames.num_frames={frames}",
          "--set", "frames.height=64", "--set", "frames.width=64", plans=None)
    deep_verify(root)


def test_the_480p_preset_builds_from_the_shipped_book_alone_and_alike(cudnn_frontend, world):
    if torch.cuda.get_device_name(0) != "NVIDIA H200":
        pytest.skip(f"the shipped books are the H200's; this GPU is {torch.cuda.get_device_name(0)}")
    roots = []
    for run in ("first", "second"):  # fresh processes, each with an empty plan folder
        root = world["folder"] / f"480p-{run}"
        done = build(world, "cosmos-predict2-480p", root, str(world["wan21"]), "t5", plans=f"plans-{run}")
        assert UNSHIPPED_NOTE not in done.stderr, done.stderr  # nothing chosen on this machine
        roots.append(root)
    assert sums(roots[0]) == sums(roots[1])
    books = [json.loads((root / "cache_config.json").read_text())["conv_plans"] for root in roots]
    assert books[0] == books[1] and books[0]


def test_the_perception_preset_with_repeated_videos_deep_verifies(cudnn_frontend, world):
    root = world["folder"] / "perception"
    build(world, "openvid-perception-stage1", root, str(world["wan21"]), "t5",
          "--set", "dataset.mask_column=mask", "--set", "dataset.depth_column=depth")
    manifest = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    assert len(manifest) == 3 and len({row["source_path"] for row in manifest}) == 2  # 3 rows over 2 videos
    for extra in ((), ("--dataset", str(world["table"]))):  # the plan's rows, then the table read again
        result = deep_verify(root, *extra)
        checks = {check["name"]: check for check in result["deep"]}
        assert checks["provenance"]["ok"] and "bit for bit" in checks["reencode"]["detail"], checks
