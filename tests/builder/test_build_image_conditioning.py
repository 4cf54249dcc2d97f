"""A CPU build with image conditioning (conditioning.image_latent=wan-i2v and a plugged-in image encoder) through
both sinks: the stored y and image tokens equal what the frames PyAV decodes give through diffusers' own
prepare_latents and the encoder, `verify --deep` passes, the training readers return them, and integrity verify
catches a tampered or non-finite condition."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
import torch
from builder.test_build_wan21 import recorded_frames

from helpers.builds import build_quietly, read_manifest
from helpers.exec_world import make_table
from helpers.random_wan import save_random_wan_vae
from helpers.tiny_image_encoder import TOKENS, WIDTH, TinyImageEncoder, project, register_tiny_image_encoder
from latentforge import CacheExpectation, LatentCacheDataset, StreamingLatentDataset, stats, verify
from latentforge.cache.expect import CacheMismatch
from latentforge.config.loading import load_config
from latentforge.dataset.collate import collate_latent_batch
from latentforge.demo.tiny_text_model import make_tiny_umt5
from latentforge.errors import ConfigError
from latentforge.verification.quality import QualityThresholds
from latentforge.verification.reencode import Overrides

FRAMES, HEIGHT, WIDTH_PX = 5, 16, 32
WAN21 = dict(base_dim=8, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
             temperal_downsample=[False, True, True], dropout=0.0)  # fmt: skip
Y_SHAPE = (20, 2, HEIGHT // 8, WIDTH_PX // 8)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("i2v")
    table = make_table(folder / "data", count=3, frames=7, width=WIDTH_PX, height=HEIGHT)
    vae, _ = save_random_wan_vae(folder / "wan" / "vae", WAN21, seed=9)
    encoder = folder / "encoder"
    encoder.mkdir()
    text = make_tiny_umt5(folder / "umt5", d_model=64, corpus=[f"clip number {i}" for i in range(3)] * 4)
    return SimpleNamespace(folder=folder, table=table, vae=vae, checkpoint=folder / "wan", encoder=encoder,
                           text=text, name=register_tiny_image_encoder())


def _config(world, root, *overrides):
    extra = {"dataset": {"reader": "table", "path": [str(world.table)], "id_column": "id"},
             "frames": {"num_frames": FRAMES, "height": HEIGHT, "width": WIDTH_PX, "resize": "stretch",
                        "window": "center"},
             "tokenizer": {"name": "wan2.1", "checkpoint": str(world.checkpoint), "precision": "fp32"},
             "text": {"name": "umt5", "path": str(world.text), "max_length": 16},
             "conditioning": {"image_latent": "wan-i2v", "image_embeds": world.name,
                              "image_encoder_path": str(world.encoder)},
             "output": {"root": str(root), "rows_per_shard": 2, "unit_size": 2, "batch_size": 1,
                        "min_free_bytes": 0},
             "run": {"workers_per_gpu": 0}}
    return load_config(extra=extra, overrides=list(overrides))


@pytest.fixture(scope="module")
def hdf5_cache(world):
    root = world.folder / "cache"
    TinyImageEncoder.calls.clear()
    build_quietly(_config(world, root))
    return root


def _diffusers_y(vae, frame0: torch.Tensor) -> torch.Tensor:
    from diffusers import WanImageToVideoPipeline

    pipeline = SimpleNamespace(vae=vae, vae_scale_factor_temporal=4, vae_scale_factor_spatial=8,
                               config=SimpleNamespace(expand_timesteps=False))
    with torch.no_grad():
        return WanImageToVideoPipeline.prepare_latents(pipeline, frame0, 1, 16, HEIGHT, WIDTH_PX, FRAMES,
                                                       torch.float32, torch.device("cpu"))[1]


def test_stored_conditioning_equals_the_references_of_the_recorded_frame_0(world, hdf5_cache):
    """Batches of one, as diffusers' pipeline encodes one image: a batch of two changes the CPU convolutions'
    summation order (tests/pipeline/test_image_condition.py bounds that)."""
    manifest = read_manifest(hdf5_cache)
    assert len(manifest) == 3
    for row in manifest:
        indices = row["provenance"]["frame_indices"]
        assert row["condition_frame"] == indices[0] == 1  # the centre window of 7 frames starts at frame 1
        frame0 = recorded_frames(world.table.parent / row["source_path"], indices[:1])  # uint8 [1, H, W, 3]
        pixels = torch.from_numpy((frame0.astype(np.float64) / 127.5 - 1.0).astype(np.float32)).permute(0, 3, 1, 2)
        with h5py.File(hdf5_cache / row["shard_path"], "r") as shard:
            y = shard["image_cond_latent"][row["cache_row"]]
            embeds = shard["clip_image_embeds"][row["cache_row"]]
        assert y.dtype == embeds.dtype == np.float16 and y.shape == Y_SHAPE and embeds.shape == (TOKENS, WIDTH)
        np.testing.assert_array_equal(y, _diffusers_y(world.vae, pixels)[0].numpy().astype(np.float16))
        np.testing.assert_array_equal(embeds, project(torch.from_numpy(frame0))[0].numpy().astype(np.float16))
    handed = torch.cat(TinyImageEncoder.calls)
    assert handed.dtype == torch.uint8 and handed.shape == (3, HEIGHT, WIDTH_PX, 3)


def test_cache_config_describes_the_conditioning(world, hdf5_cache):
    from latentforge.cache.config_file import CacheConfig

    section = CacheConfig.load(hdf5_cache).conditioning
    assert (section.image_latent, section.image_embeds, section.precision) == ("wan-i2v", world.name, "fp32")
    assert {s.name: (s.shape, s.dtype) for s in section.streams} == {
        "image_cond_latent": (Y_SHAPE, "float16"), "clip_image_embeds": ((TOKENS, WIDTH), "float16")}
    assert section.stream("clip_image_embeds").producer["name"] == world.name
    assert "image_cond_latent  float16  [N, 20, 2, 2, 4]" in (hdf5_cache / "README.md").read_text()
    assert section.stream("image_cond_latent").producer["tokenizer"]["name"] == "wan2.1"


def test_deep_verify_re_encodes_the_conditioning_exactly(hdf5_cache):
    anything = QualityThresholds(-np.inf, -np.inf, -np.inf, -np.inf)  # random weights decode to noise
    report = verify(hdf5_cache, deep=True, spot=2, thresholds=anything)
    assert report.ok, [f"{c.name}: {c.detail}" for c in report.failures]
    checks = {c.name: c for c in report.checks}
    assert checks["conditioning"].ok and "bit for bit" in checks["conditioning"].detail
    assert report.comparison.startswith("exact")


def test_the_training_dataset_returns_and_batches_the_streams(hdf5_cache):
    dataset = LatentCacheDataset(hdf5_cache, expect={"conditioning": ("image_cond_latent", "clip_image_embeds"),
                                                     "image_latent": "wan-i2v"})
    batch = collate_latent_batch([dataset[i] for i in range(3)])
    assert batch["image_cond_latent"].shape == (3, *Y_SHAPE) and batch["clip_image_embeds"].shape == (3, 3, 4)
    with h5py.File(hdf5_cache / read_manifest(hdf5_cache)[2]["shard_path"], "r") as shard:
        np.testing.assert_array_equal(batch["image_cond_latent"][2].numpy(), shard["image_cond_latent"][0])


def test_a_cache_without_the_stream_is_refused_by_the_expectation(world, hdf5_cache, tmp_path):
    root = tmp_path / "plain"
    build_quietly(_config(world, root, "conditioning.image_latent=none", "conditioning.image_embeds=none",
                          "conditioning.image_encoder_path=null"))
    assert "condition_frame" not in read_manifest(root)[0]
    with pytest.raises(CacheMismatch, match="conditioning"):
        LatentCacheDataset(root, expect=CacheExpectation(conditioning=("image_cond_latent",)))


def test_webdataset_sink_stores_the_same_conditioning(world, hdf5_cache, tmp_path):
    root = tmp_path / "wds"
    build_quietly(_config(world, root, "output.sink=webdataset", f"output.staging_dir={tmp_path / 'stage'}"))
    assert verify(str(root)).ok
    items = {item["dataset_index"]: item for item in StreamingLatentDataset(str(root))}
    reference = LatentCacheDataset(hdf5_cache)
    for index, item in items.items():
        for name in ("image_cond_latent", "clip_image_embeds"):
            assert torch.equal(item[name], reference[index][name])


def _tampered(source, target, change):
    shutil.copytree(source, target)
    row = read_manifest(target)[0]
    with h5py.File(target / row["shard_path"], "r+") as shard:
        change(shard)
    return verify(target)


def test_integrity_verify_catches_a_non_finite_or_tampered_condition(hdf5_cache, tmp_path):
    def nan(shard):
        shard["clip_image_embeds"][0, 0, 0] = np.nan

    def unmask(shard):
        shard["image_cond_latent"][0, 0, 1] = 1.0  # the mask says latent frame 1 is given

    for name, change in (("nan", nan), ("unmask", unmask)):
        report = _tampered(hdf5_cache, tmp_path / name, change)
        failed = {c.name: c.detail for c in report.failures}
        assert "conditioning_rows" in failed, failed


def test_stats_summarise_the_streams(hdf5_cache, tmp_path):
    summary = stats(hdf5_cache, out=tmp_path / "stats").stats.to_json()["conditioning"]
    rows = [LatentCacheDataset(hdf5_cache)[i] for i in range(3)]
    latent = torch.stack([row["image_cond_latent"][4:] for row in rows]).double()  # the mask channels left out
    np.testing.assert_allclose(summary["image_cond_latent"]["latent_channel_mean"],
                               latent.mean(dim=(0, 2, 3, 4)).numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(summary["image_cond_latent"]["latent_channel_std"],
                               latent.std(dim=(0, 2, 3, 4), unbiased=False).numpy(), rtol=1e-6, atol=1e-9)
    norms = torch.stack([row["clip_image_embeds"] for row in rows]).double().norm(dim=-1)
    assert summary["clip_image_embeds"]["token_norm_mean"] == pytest.approx(float(norms.mean()), rel=1e-9)
    assert summary["clip_image_embeds"]["samples"] == 3


def test_first_frame_stores_nothing_extra_and_records_where_the_condition_is(world, tmp_path):
    from latentforge.cache.config_file import CacheConfig
    from latentforge.tokenizers.wan import wan22_checkpoint

    save_random_wan_vae(tmp_path / "wan22" / "vae", wan22_checkpoint.diffusers_config(8, 8), seed=2)
    root = tmp_path / "ti2v"
    build_quietly(_config(world, root, "tokenizer.name=wan2.2", f"tokenizer.checkpoint={tmp_path / 'wan22'}",
                          "conditioning.image_latent=first-frame", "conditioning.image_embeds=none",
                          "conditioning.image_encoder_path=null"))
    section = CacheConfig.load(root).conditioning
    assert section.streams == () and section.in_latent["latent_frames"] == [0, 1]
    assert section.in_latent["dataset"] == "video_latent_state"
    with h5py.File(root / read_manifest(root)[0]["shard_path"], "r") as shard:
        assert not {"image_cond_latent", "clip_image_embeds"} & set(shard)
    assert [row["condition_frame"] for row in read_manifest(root)] == [1, 1, 1]
    assert verify(root).ok
    assert "image_cond_latent" not in LatentCacheDataset(root, expect={"image_latent": "first-frame"})[0]


def test_clip_vit_h14_tokens_equal_diffusers_encode_image_of_the_recorded_frame_0(world, tmp_path):
    """The registered CLIP encoder plugged into a build: its stored tokens are diffusers' own
    WanImageToVideoPipeline.encode_image of frame 0 as PyAV decodes it (a tiny random CLIP ViT tower)."""
    import PIL.Image
    from diffusers import WanImageToVideoPipeline
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

    folder = tmp_path / "Wan2.1-I2V-tiny"
    torch.manual_seed(0)
    CLIPVisionModel(CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=3,
                                     image_size=28, patch_size=14, hidden_act="gelu", layer_norm_eps=1e-5)
                    ).save_pretrained(folder / "image_encoder")
    CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}).save_pretrained(
        folder / "image_processor")
    root = tmp_path / "clip"
    build_quietly(_config(world, root, "conditioning.image_embeds=clip-vit-h14",
                          f"conditioning.image_encoder_path={folder}", "conditioning.image_latent=none"))
    holder = SimpleNamespace(image_processor=CLIPImageProcessor.from_pretrained(folder / "image_processor"),
                             image_encoder=CLIPVisionModel.from_pretrained(folder / "image_encoder").eval())
    for row in read_manifest(root):
        frame0 = recorded_frames(world.table.parent / row["source_path"], [row["condition_frame"]])
        with torch.no_grad():
            expected = WanImageToVideoPipeline.encode_image(holder, [PIL.Image.fromarray(frame0[0])],
                                                            device=torch.device("cpu"))
        with h5py.File(root / row["shard_path"], "r") as shard:
            stored = shard["clip_image_embeds"][row["cache_row"]]
            assert "image_cond_latent" not in shard
        assert stored.shape == (5, 32)  # 2 x 2 patches + the class token, the tower's width
        np.testing.assert_array_equal(stored, expected[0].numpy().astype(np.float16))
    assert verify(root).ok
    # the encoder moved: deep verify is told where it is now, and refuses other weights there
    moved = folder.rename(tmp_path / "moved")
    anything = QualityThresholds(-np.inf, -np.inf, -np.inf, -np.inf)  # random weights decode to noise
    report = verify(root, deep=True, spot=1, thresholds=anything, overrides=Overrides(image_encoder_path=str(moved)))
    assert report.ok, [f"{c.name}: {c.detail}" for c in report.failures]
    torch.manual_seed(1)
    CLIPVisionModel(CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=3,
                                     image_size=28, patch_size=14, hidden_act="gelu", layer_norm_eps=1e-5)
                    ).save_pretrained(moved / "image_encoder")
    with pytest.raises(ConfigError, match="SHA-256"):
        verify(root, deep=True, spot=1, thresholds=anything, overrides=Overrides(image_encoder_path=str(moved)))


def test_musubi_export_carries_the_built_conditioning(world, tmp_path):
    """The musubi-tuner export of a Wan2.2 I2V-A14B cache (y, no image tokens) reads the y the build stored,
    unchanged (export/musubi_i2v.py checks the file format against musubi-tuner itself)."""
    from safetensors.torch import load_file

    from latentforge.export.run import export_cache

    root = tmp_path / "a14b"
    build_quietly(_config(world, root, "conditioning.image_embeds=none", "conditioning.image_encoder_path=null"))
    with pytest.warns(UserWarning, match="64 wide"):  # the tiny umT5's width; a Wan DiT takes 4096
        export_cache(root, "musubi", tmp_path / "musubi", force=True, musubi_task="i2v-A14B")
    dataset = LatentCacheDataset(root)
    files = sorted((tmp_path / "musubi").glob("*_wan.safetensors"))
    assert len(files) == 3
    for index, path in enumerate(files):
        tensors = load_file(path)
        y = next(value for key, value in tensors.items() if key.startswith("latents_image_"))
        assert torch.equal(y, dataset[index]["image_cond_latent"])
        assert not any(key.startswith("clip_") for key in tensors)
