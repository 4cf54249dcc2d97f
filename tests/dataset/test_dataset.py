"""LatentCacheDataset against h5py reads of the documented layout; expectations; DataLoader under fork/spawn."""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from helpers.fake_cache import (
    edit_cache_config,
    h5py_empty_prompt,
    h5py_row,
    manifest_rows,
    read_json_config,
    real_cache_root,
    write_fake_cache,
)
from latentforge.dataset import (
    CacheExpectation,
    CacheMismatch,
    LatentCacheDataset,
    collate_latent_batch,
    drop_captions,
)
from latentforge.errors import CacheIntegrityError, ConfigError
from latentforge.sinks.hdf5 import row_reader


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory) -> Path:
    return write_fake_cache(tmp_path_factory.mktemp("cache") / "root", num_samples=24, rows_per_shard=10)


ROOTS = ["fake"] + (["real"] if real_cache_root() else [])


@pytest.fixture(params=ROOTS)
def any_root(request, fake_root) -> Path:
    return fake_root if request.param == "fake" else real_cache_root()


def _text_names(config):
    return config["text"]["embeddings_dataset"], config["text"]["length_dataset"]


def test_items_equal_h5py_rows(any_root):
    config = read_json_config(any_root)
    dataset = LatentCacheDataset(any_root)
    rows = manifest_rows(any_root)
    assert len(dataset) == len(rows) == config["num_samples"]
    step = max(1, len(rows) // 16)  # a real cache is big: every row of a fake one, a spread of a real one
    emb_name, len_name = _text_names(config)
    rgb = next(m for m in config["latent"]["modalities"] if m["role"] == "conditioning+target")
    for row in rows[::step] + rows[-1:]:
        item = dataset[row["dataset_index"]]
        ref = h5py_row(any_root, row)
        np.testing.assert_array_equal(item["latent"].numpy(), ref[config["latent"]["dataset"]])
        assert item["latent"].dtype == torch.float16 and str(ref[config["latent"]["dataset"]].dtype) == "float16"
        c0, c1 = rgb["channels"]
        np.testing.assert_array_equal(item["conditioning_latent"].numpy(), ref[config["latent"]["dataset"]][c0:c1, :1])
        np.testing.assert_array_equal(item["text_embeddings"].numpy(), ref[emb_name])
        length = int(ref[len_name])
        assert item["text_length"].item() == length
        assert item["text_mask"].tolist() == [True] * length + [False] * (ref[emb_name].shape[0] - length)
        assert not ref[emb_name][length:].any()  # contract: rows past the length are exactly 0
        assert item["source_index"] == int(ref["source_index"]) == row["source_index"]
        assert (item["dataset_index"], item["sample_id"], item["prompt"]) == (
            row["dataset_index"], row["sample_id"], row["prompt"])


def test_selected_modalities_follow_channel_ranges(any_root):
    config = read_json_config(any_root)
    names = [m["name"] for m in config["latent"]["modalities"]]
    chosen = names[::-1]  # reversed order: non-adjacent reads, output in the order asked for
    dataset = LatentCacheDataset(any_root, modalities=chosen)
    row = manifest_rows(any_root)[-1]
    ref = h5py_row(any_root, row)[config["latent"]["dataset"]]
    ranges = {m["name"]: m["channels"] for m in config["latent"]["modalities"]}
    expected = np.concatenate([ref[ranges[n][0] : ranges[n][1]] for n in chosen])
    np.testing.assert_array_equal(dataset[row["dataset_index"]]["latent"].numpy(), expected)
    last = names[-1]
    only = LatentCacheDataset(any_root, modalities=[last])[row["dataset_index"]]
    np.testing.assert_array_equal(only["latent"].numpy(), ref[ranges[last][0] : ranges[last][1]])
    rgb = next(m for m in config["latent"]["modalities"] if m["role"] == "conditioning+target")["channels"]
    np.testing.assert_array_equal(only["conditioning_latent"].numpy(), ref[rgb[0] : rgb[1], :1])
    with pytest.raises(ConfigError, match="'normals' is not in the cache"):
        LatentCacheDataset(any_root, modalities=["rgb", "normals"])


# The values the fake cache was written with, stated here rather than read back through our code.
TRUE = CacheExpectation(
    tokenizer_family="wan2.1", tokenizer_sha256="0" * 64, precision="cosmos-bf16", num_frames=9, height=32,
    width=48, fps="source", modalities=("rgb", "mask", "depth"), latent_shape=(48, 3, 4, 6),
    normalization="tokenizer", storage_dtype="float16", text_encoder="t5", text_dim=32, text_max_length=16,
    vocabulary=0, token_grid=(), conditioning=(), image_latent="none",
)
WRONG = {
    "tokenizer_family": "wan2.2", "tokenizer_sha256": "f" * 64, "precision": "fp32", "num_frames": 93,
    "height": 480, "width": 832, "fps": "16", "modalities": ("rgb", "depth"), "latent_shape": (48, 24, 60, 104),
    "normalization": "none", "storage_dtype": "float32", "text_encoder": "umt5", "text_dim": 4096,
    "text_max_length": 512, "vocabulary": 64000, "token_grid": (3, 4, 6), "conditioning": ("image_cond_latent",),
    "image_latent": "wan-i2v",
}


def test_matching_expectation_passes(fake_root):
    dataset = LatentCacheDataset(fake_root, expect=TRUE)
    assert dataset.expectation == TRUE
    LatentCacheDataset(fake_root, expect={k: v for k, v in TRUE.to_dict().items() if v is not None})


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(CacheExpectation)])
def test_every_expect_field_mismatch_raises_naming_it(fake_root, field):
    assert set(WRONG) == {f.name for f in dataclasses.fields(CacheExpectation)}
    wrong = dataclasses.replace(TRUE, **{field: WRONG[field]})
    with pytest.raises(CacheMismatch) as caught:
        LatentCacheDataset(fake_root, modalities=TRUE.modalities, expect=wrong)
    assert [m[0] for m in caught.value.mismatches] == [field]
    message = str(caught.value)
    assert f"{field}: trainer expects {WRONG[field]!r}, cache has {getattr(TRUE, field)!r}" in message


def test_wan22_cache_never_feeds_a_wan21_trainer(tmp_path):
    tokenizer = {"name": "wan2.2", "checkpoint_sha256": "1" * 64, "precision": "bf16", "latent_channels": 48}
    root = write_fake_cache(tmp_path / "c", num_samples=2, modalities=("rgb",), channels=48, tokenizer=tokenizer)
    with pytest.raises(CacheMismatch, match="tokenizer_family: trainer expects 'wan2.1', cache has 'wan2.2'"):
        LatentCacheDataset(root, expect={"tokenizer_family": "wan2.1"})
    edit_cache_config(root, "tokenizer.family", "wan2.2")
    edit_cache_config(root, "tokenizer.name", "wan2.2-ti2v-5b")
    with pytest.raises(CacheMismatch, match="tokenizer_family"):
        LatentCacheDataset(root, expect={"tokenizer_family": "wan2.1"})


def test_unknown_expect_key_lists_the_allowed_ones(fake_root):
    with pytest.raises(ConfigError, match="unknown expect= key 'frames'; allowed keys: tokenizer_family"):
        LatentCacheDataset(fake_root, expect={"frames": 93})


def test_root_from_environment(fake_root, monkeypatch):
    monkeypatch.delenv("LATENTFORGE_CACHE_ROOT", raising=False)
    monkeypatch.delenv("WORLD_PERCEPTION_LATENT_CACHE_ROOT", raising=False)
    with pytest.raises(ConfigError, match="WORLD_PERCEPTION_LATENT_CACHE_ROOT"):
        LatentCacheDataset()
    monkeypatch.setenv("WORLD_PERCEPTION_LATENT_CACHE_ROOT", str(fake_root))
    assert LatentCacheDataset().root == fake_root
    monkeypatch.setenv("LATENTFORGE_CACHE_ROOT", str(fake_root / "shards"))  # the primary name wins
    with pytest.raises(ConfigError, match="no cache_config.json"):
        LatentCacheDataset()


def test_integrity_errors(tmp_path):
    root = write_fake_cache(tmp_path / "c", num_samples=4, rows_per_shard=4)
    row = manifest_rows(root)[2]
    with h5py.File(root / row["shard_path"], "r+") as handle:
        handle["source_index"][row["cache_row"]] = 999
    dataset = LatentCacheDataset(root)
    dataset[1]
    with pytest.raises(CacheIntegrityError, match="source_index is 999"):
        dataset[2]
    (root / "_CACHE_COMPLETE").unlink()
    with pytest.raises(CacheIntegrityError, match="_CACHE_COMPLETE"):
        LatentCacheDataset(root)
    assert len(LatentCacheDataset(root, require_complete=False)) == 4


def test_caption_dropout_uses_the_cached_empty_prompt(fake_root):
    dataset = LatentCacheDataset(fake_root)
    batch = collate_latent_batch([dataset[i] for i in range(4)])
    original = batch["text_embeddings"].clone()
    assert not drop_captions(batch, dataset.empty_prompt(), 0.0).any()
    assert torch.equal(batch["text_embeddings"], original)
    assert drop_captions(batch, dataset.empty_prompt(), 1.0).all()
    ref = h5py_empty_prompt(fake_root)
    for row in range(4):
        np.testing.assert_array_equal(batch["text_embeddings"][row].numpy(), ref["t5_text_embeddings"])
        assert batch["text_length"][row].item() == int(ref["t5_text_length"]) == batch["text_mask"][row].sum()


def test_batches_equal_h5py_rows_in_any_order(fake_root):
    dataset = LatentCacheDataset(fake_root, modalities=["mask", "rgb"])
    rows = manifest_rows(fake_root)
    items = dataset.__getitems__([23, 4, 11])  # three shards
    for batch_items in (items, items[::-1]):  # rows of one buffer as read, and a reordering of them
        batch = collate_latent_batch(batch_items)
        for slot, item in enumerate(batch_items):
            ref = h5py_row(fake_root, rows[item["dataset_index"]])
            latent = ref["perception_latent_state"]
            np.testing.assert_array_equal(batch["latent"][slot].numpy(), np.concatenate([latent[16:32], latent[:16]]))
            np.testing.assert_array_equal(batch["conditioning_latent"][slot].numpy(), latent[:16, :1])
            np.testing.assert_array_equal(batch["text_embeddings"][slot].numpy(), ref["t5_text_embeddings"])


@pytest.fixture(params=["main process", "worker"])
def reading_in(request, monkeypatch):
    """Run a test as the main process reads, and as a DataLoader worker reads (memfd path for plain rows)."""
    if request.param == "worker":
        monkeypatch.setattr(row_reader, "get_worker_info", lambda: object())
    return request.param


def test_other_hdf5_layouts_read_through_h5py(tmp_path, reading_in):
    root = write_fake_cache(tmp_path / "c", num_samples=12, rows_per_shard=6)
    rows = manifest_rows(root)
    shard = root / rows[0]["shard_path"]  # rewrite the first shard compressed and chunked differently
    with h5py.File(shard, "r") as handle:
        data = {name: handle[name][...] for name in handle}
    shard.unlink()
    with h5py.File(shard, "w") as handle:
        for name, values in data.items():
            chunks = (2, *values.shape[1:]) if values.ndim > 1 else None
            handle.create_dataset(name, data=values, chunks=chunks, compression="gzip" if values.ndim > 1 else None)
    dataset = LatentCacheDataset(root, modalities=["depth", "rgb"])
    for indices in ([1, 7, 0], [9, 6]):  # both layouts in one batch; plain rows only
        batch = collate_latent_batch(dataset.__getitems__(indices))
        for slot, index in enumerate(indices):
            ref = h5py_row(root, rows[index])
            latent = ref["perception_latent_state"]
            np.testing.assert_array_equal(batch["latent"][slot].numpy(), np.concatenate([latent[32:], latent[:16]]))
            np.testing.assert_array_equal(batch["conditioning_latent"][slot].numpy(), latent[:16, :1])
            np.testing.assert_array_equal(batch["text_embeddings"][slot].numpy(), ref["t5_text_embeddings"])


def test_batches_release_their_file_descriptors(fake_root, reading_in):
    dataset = LatentCacheDataset(fake_root)
    dataset.__getitems__([0, 10, 20])  # every shard open
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for start in range(0, 20, 2):
        collate_latent_batch(dataset.__getitems__([start, start + 1]))
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before  # a leak would add one per batch and field


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_fork_and_spawn(fake_root, method):
    dataset = LatentCacheDataset(fake_root)
    dataset[0]  # handles opened in the parent must not leak into forked workers
    rows = manifest_rows(fake_root)
    loader = DataLoader(dataset, batch_size=5, shuffle=True, num_workers=2, pin_memory=True,
                        persistent_workers=True, collate_fn=collate_latent_batch,
                        multiprocessing_context=multiprocessing.get_context(method))
    for _ in range(2):
        seen = []
        for batch in loader:
            seen += batch["dataset_index"].tolist()
            for slot, index in enumerate(batch["dataset_index"].tolist()):
                ref = h5py_row(fake_root, rows[index])
                np.testing.assert_array_equal(batch["latent"][slot].numpy(), ref["perception_latent_state"])
                np.testing.assert_array_equal(batch["text_embeddings"][slot].numpy(), ref["t5_text_embeddings"])
        assert sorted(seen) == list(range(len(dataset)))
