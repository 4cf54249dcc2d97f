"""The caption and near-duplicate passes of a Ray build run in a Ray task, not in the driver: the driver's captioner and
CLIP loads fail in this test, so a pass that ran here would stop the build. Their results are recorded in the
driver's build/ as a local build records them: a build stopped after the passes is resumed without placing either
pass again, and the committed manifest holds the generated captions and the near duplicate's reject."""

from __future__ import annotations

import csv
import json

import pytest
import torch
from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

from helpers.builds import read_manifest
from helpers.media import pattern_frames, write_video
from helpers.ray_nodes import local_ray
from helpers.tiny_vlm import DECODED, make_tiny_qwen_vl
from latentforge.builder.run import build
from latentforge.captions.qwen_vl import QwenVLCaptioner
from latentforge.conditioning.clip_embedding import ClipImageEmbedder
from latentforge.config.loading import load_config
from latentforge.errors import LatentforgeError
from latentforge.executor.ray.executor import RayExecutor

KNOWN = "clip number 2"
# tests/builder/test_build_dedup.py's tiny tower (the released layout at 32 px)
TINY_CLIP = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=2, image_size=32,
                 patch_size=8, projection_dim=16, hidden_act="gelu")  # fmt: skip


@pytest.fixture(scope="module")
def cluster():
    with local_ray():
        yield


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """clip000 and clip001 list the same video (similarity exactly 1); clip002 has a caption, the others none."""
    folder = tmp_path_factory.mktemp("ray-curation")
    (folder / "videos").mkdir()
    videos = {"a": pattern_frames(9, 64, 48, seed=0), "b": 255 - pattern_frames(9, 64, 48, seed=3)[:, ::-1],
              "c": pattern_frames(9, 64, 48, seed=7)[::-1]}
    for name, frames in videos.items():
        write_video(folder / "videos" / f"{name}.mp4", frames)
    table = folder / "samples.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "video", "caption"])
        writer.writerows([("clip000", "videos/a.mp4", ""), ("clip001", "videos/a.mp4", ""),
                          ("clip002", "videos/b.mp4", KNOWN), ("clip003", "videos/c.mp4", "")])
    torch.manual_seed(0)
    tower = CLIPVisionModelWithProjection(CLIPVisionConfig(**TINY_CLIP)).eval()
    tower.save_pretrained(folder / "clip" / "image_encoder")
    return table, folder / "clip", make_tiny_qwen_vl(folder / "qwen")


@pytest.fixture
def placed(monkeypatch):
    """(pass, windows) of every DeviceWork the Ray executor placed; the driver's own model loads fail."""
    calls: list[tuple[str, int]] = []
    real = RayExecutor.run_device_work

    def counted(self, work, on_batch):
        calls.append((work.what, len(work.windows)))
        return real(self, work, on_batch)

    def in_the_driver(*args, **kwargs):
        raise AssertionError("a curation model was loaded in the driver")

    monkeypatch.setattr(RayExecutor, "run_device_work", counted)
    monkeypatch.setattr(QwenVLCaptioner, "load", classmethod(in_the_driver))
    monkeypatch.setattr(ClipImageEmbedder, "load", classmethod(in_the_driver))
    return calls


@pytest.mark.slow
def test_passes_run_in_a_ray_task_and_a_resume_places_none_again(world, cluster, placed, tmp_path, monkeypatch):
    table, clip, qwen = world
    root = tmp_path / "cache"
    config = load_config(None, [
        "dataset.reader=table", f"dataset.path={table}", "dataset.id_column=id", f"output.root={root}",
        "tokenizer.name=haar-4x8x8", "text.name=none", "frames.num_frames=9", "frames.height=48", "frames.width=64",
        "output.rows_per_shard=4", "output.unit_size=2", "output.min_free_bytes=0", "run.executor=ray",
        "run.procs=1", "run.workers_per_gpu=0", "dedup.enabled=true", f"dedup.model={clip}", "dedup.frames=2",
        "dedup.threshold=0.99999", "captions.mode=generate_missing", f"captions.model={qwen}", "captions.frames=2",
        "captions.resolution=56", "captions.max_new_tokens=16", "captions.batch_size=2"])

    def stop_before_units(self, units, on_event, plans=None):
        raise LatentforgeError("stopped after the passes")

    with monkeypatch.context() as stopped:
        stopped.setattr(RayExecutor, "run", stop_before_units)
        with pytest.raises(LatentforgeError, match="stopped after the passes"):
            build(config, quiet=True)
    # every window embedded; the duplicate is not captioned, nor clip002, which has its caption
    assert placed == [("near-duplicate pass", 4), ("caption pass", 2)]
    assert len(list((root / "build" / "captions").rglob("*.json"))) == 2
    assert len(list((root / "build" / "dedup").rglob("*.npy"))) == 3  # clip000 and clip001: one window, one key

    build(config, quiet=True)
    assert placed == [("near-duplicate pass", 4), ("caption pass", 2)]  # all read back from build/
    manifest = {row["sample_id"]: row for row in read_manifest(root)}
    assert {k: row["prompt"] for k, row in manifest.items()} == {"clip000": DECODED, "clip002": KNOWN,
                                                                 "clip003": DECODED}
    assert manifest["clip000"]["provenance"]["caption"]["generated"] is True
    rejects = [json.loads(line) for line in (root / "rejects.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["reason"]) for r in rejects] == [("clip001", "near_duplicate")]

