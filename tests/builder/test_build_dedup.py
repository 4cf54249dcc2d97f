"""dedup.enabled: a build of generated clips where one video is listed under two ids and a slightly noised copy of it
under a third rejects exactly those two as near_duplicate, naming the kept id and the similarity that transformers'
own CLIPVisionModelWithProjection gives for frames PyAV decodes; the kept rows are the bytes a build without dedup
writes; the embeddings are recorded, so a resumed build computes none again (counted on the encoder) and an
--extend computes only the new window's, comparing it with the kept windows of the first build."""

from __future__ import annotations

import csv
import hashlib
import json

import av
import h5py
import numpy as np
import pytest
import torch
from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection

from helpers.builds import read_manifest
from helpers.exec_world import build_args
from helpers.media import pattern_frames, write_video
from latentforge.conditioning.clip_embedding import ClipImageEmbedder

FRAMES = [0, 8]  # dedup.frames=2 over the 9-frame window: its first and last frame
# the released tower's layout (pre-norm, exact GELU, class token, projection) at 32 px, patch 8, width 32
TINY = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=2, image_size=32,
            patch_size=8, projection_dim=16, hidden_act="gelu")  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dedup")
    (folder / "videos").mkdir()
    original = pattern_frames(9, 48, 32, seed=0)
    noise = np.random.default_rng(5).integers(-6, 7, original.shape)
    videos = {"original": original, "noisy": np.clip(original + noise, 0, 255).astype(np.uint8)}
    other = 255 - pattern_frames(9, 64, 32, seed=3)[:, ::-1]  # wider: windows of two sizes in one encoder call
    noise = np.random.default_rng(5).integers(-6, 7, other.shape)
    videos.update(other=other, other_noisy=np.clip(other + noise, 0, 255).astype(np.uint8))
    for name, frames in videos.items():
        write_video(folder / "videos" / f"{name}.mp4", frames)
    torch.manual_seed(0)
    model = CLIPVisionModelWithProjection(CLIPVisionConfig(**TINY)).eval()
    model.save_pretrained(folder / "clip" / "image_encoder")
    rows = [("clip000", "original"), ("clip001", "original"), ("clip002", "noisy"), ("clip003", "other")]
    return folder, model, rows


def _table(folder, rows, name):
    path = folder / name
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "video", "caption"])
        writer.writerows([(sample, f"videos/{video}.mp4", f"clip {sample}") for sample, video in rows])
    return path


def _reference(folder, model, video) -> np.ndarray:
    """The window embedding from PyAV's frames and transformers' processor and model, called directly: the mean of
    the frames' unit image_embeds, normalised."""
    with av.open(str(folder / "videos" / f"{video}.mp4")) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    pixels = processor(images=[frames[i] for i in FRAMES], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        embeds = model(pixel_values=pixels).image_embeds.double().numpy()
    mean = (embeds / np.linalg.norm(embeds, axis=1, keepdims=True)).mean(axis=0)
    return mean / np.linalg.norm(mean)


@pytest.fixture(scope="module")
def threshold(world):
    """Halfway between the noised copy's similarity and the distinct clip's (the tiny random tower puts both near 1)."""
    folder, model, _ = world
    original, noisy, other = (_reference(folder, model, v) for v in ("original", "noisy", "other"))
    near, apart = float(original @ noisy), float(original @ other)
    assert near - apart > 2e-3, (near, apart)
    return round((near + apart) / 2, 4), near


def _args(table, root, folder, threshold, *extra):
    return build_args(table, root, "--set", "dedup.enabled=true", "--set", f"dedup.model={folder / 'clip'}",
                      "--set", f"dedup.threshold={threshold}", "--set", "dedup.frames=2", *extra)


def _rejects(root):
    return [json.loads(line) for line in (root / "rejects.jsonl").read_text().splitlines()]


def _latents(root) -> dict[str, bytes]:
    out = {}
    for row in read_manifest(root):
        with h5py.File(root / row["shard_path"]) as shard:
            out[row["sample_id"]] = shard["video_latent_state"][row["cache_row"]].tobytes()
    return out


@pytest.fixture
def embed_calls(monkeypatch):
    """The windows of every encoder call (the real embed runs), and every load."""
    calls: dict[str, list[int]] = {"embed": [], "load": []}
    real_embed, real_load = ClipImageEmbedder.embed, ClipImageEmbedder.load.__func__

    def embed(self, frames):
        calls["embed"].append(len(frames) // len(FRAMES))
        return real_embed(self, frames)

    def load(cls, path, device, expected_sha256):
        calls["load"].append(1)
        return real_load(cls, path, device, expected_sha256)

    monkeypatch.setattr(ClipImageEmbedder, "embed", embed)
    monkeypatch.setattr(ClipImageEmbedder, "load", classmethod(load))
    return calls


def test_exactly_the_duplicates_are_rejected_naming_the_kept_id_and_the_rest_is_unchanged(world, threshold, cli,
                                                                                           tmp_path):
    folder, _, rows = world
    table, root = _table(folder, rows, "four.csv"), tmp_path / "cache"
    cut, near = threshold
    done = cli(_args(table, root, folder, cut))
    assert done.returncode == 0, done.stderr
    rejects = _rejects(root)
    assert [(r["sample_id"], r["reason"]) for r in rejects] == [("clip001", "near_duplicate"),
                                                                ("clip002", "near_duplicate")]
    assert "near duplicate of sample 'clip000', which is kept" in rejects[0]["detail"]
    assert "similarity of their CLIP embeddings is 1.0000" in rejects[0]["detail"]  # the same frames: exactly 1
    shown = float(rejects[1]["detail"].split("CLIP embeddings is ")[1].split(",")[0])
    assert shown == pytest.approx(near, abs=2e-3)  # our decode and preprocessing against PyAV and transformers
    assert f"dedup.threshold={cut}" in rejects[1]["detail"]

    plain = tmp_path / "plain"
    assert cli(build_args(table, plain)).returncode == 0
    kept = _latents(root)
    assert list(kept) == ["clip000", "clip003"]
    assert kept == {k: v for k, v in _latents(plain).items() if k in kept}

    config = json.loads((root / "cache_config.json").read_text())
    digest = hashlib.sha256((folder / "clip" / "image_encoder" / "model.safetensors").read_bytes()).hexdigest()
    assert config["dedup"]["threshold"] == cut and config["dedup"]["frames"] == 2
    assert config["dedup"]["embedder"]["checkpoint_sha256"] == digest
    assert config["dedup"]["embedder"]["embedding"] == "image_embeds"
    assert "dedup" not in json.loads((plain / "cache_config.json").read_text())


def test_a_resume_computes_no_embedding_again_and_an_extend_only_the_new_ones(world, threshold, cli, tmp_path,
                                                                             embed_calls):
    folder, _, rows = world
    root, cut = tmp_path / "cache", threshold[0]
    args = _args(_table(folder, rows, "first.csv"), root, folder, cut)
    stopped = cli(args, LATENTFORGE_FAULT="encode:1:raise")
    assert stopped.returncode != 0 and not (root / "manifest.jsonl").exists()
    assert embed_calls == {"embed": [4], "load": [1]}  # one batch of every window, before any unit

    done = cli(args)
    assert done.returncode == 0, done.stderr
    assert embed_calls == {"embed": [4], "load": [1]}  # every embedding read back: the encoder not even loaded
    assert [r["sample_id"] for r in _rejects(root)] == ["clip001", "clip002"]

    refused = cli(_args(_table(folder, rows, "first.csv"), root, folder, 0.5))
    assert refused.returncode != 0 and f"config.dedup.threshold: {cut} -> 0.5" in refused.stderr

    grown = _table(folder, [*rows, ("clip004", "other_noisy")], "grown.csv")
    extended = cli(_args(grown, root, folder, cut, "--extend", "--max-reject-fraction", "1"))
    assert extended.returncode == 0, extended.stderr
    assert embed_calls == {"embed": [4, 1], "load": [1, 1]}  # the new window only
    rejects = {r["sample_id"]: r for r in _rejects(root)}
    assert list(rejects) == ["clip001", "clip002", "clip004"]
    assert "near duplicate of sample 'clip003', which is kept" in rejects["clip004"]["detail"]
    assert [row["sample_id"] for row in read_manifest(root)] == ["clip000", "clip003"]
