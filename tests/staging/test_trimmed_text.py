"""text.storage: trimmed stores only each row's valid tokens; every reader restores the zero-padded rows that
padded storage holds, bit for bit. Checked against h5py's view of both layouts and a real build of each."""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest
import torch

from helpers.builds import build_quietly, tiny_config
from helpers.fake_rows import build_cache, make_samples
from latentforge import LatentCacheDataset
from latentforge.errors import CacheIntegrityError
from latentforge.sinks.hdf5 import commit as commit_module
from latentforge.sinks.hdf5.integrity import verify_integrity

EMBEDDINGS, LENGTHS = "t5_text_embeddings", "t5_text_length"


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """The same staged rows committed padded and trimmed."""
    folder = tmp_path_factory.mktemp("trimmed")
    data = make_samples()
    build_cache(folder / "padded", data)
    build_cache(folder / "trimmed", data, text_storage="trimmed")
    return folder / "padded", folder / "trimmed", data


def _shards(root):
    return sorted((root / "shards").iterdir())


def _assert_same_items(padded_root, trimmed_root):
    padded, trimmed = LatentCacheDataset(padded_root), LatentCacheDataset(trimmed_root)
    assert len(padded) == len(trimmed) > 0
    for left, right in zip(padded.__getitems__(list(range(len(padded)))),
                           trimmed.__getitems__(list(range(len(trimmed))))):
        for key in ("latent", "text_embeddings", "text_length", "text_mask"):
            assert torch.equal(left[key], right[key]), key
    for key in ("text_embeddings", "text_length", "text_mask"):
        assert torch.equal(padded.empty_prompt()[key], trimmed.empty_prompt()[key]), key


def test_trimmed_rows_hold_only_the_valid_tokens_and_read_back_as_padded(committed):
    padded_root, trimmed_root, _ = committed
    for padded_shard, trimmed_shard in zip(_shards(padded_root), _shards(trimmed_root)):
        with h5py.File(padded_shard, "r") as padded, h5py.File(trimmed_shard, "r") as trimmed:
            assert h5py.check_vlen_dtype(trimmed[EMBEDDINGS].dtype) == np.float16
            assert trimmed[EMBEDDINGS].shape == trimmed[LENGTHS].shape == padded[LENGTHS].shape
            for row, length in enumerate(padded[LENGTHS][()]):
                assert np.array_equal(trimmed[EMBEDDINGS][row], padded[EMBEDDINGS][row][:length].reshape(-1))
                assert not padded[EMBEDDINGS][row][length:].any()
    config = json.loads((trimmed_root / "cache_config.json").read_text())
    assert config["text"]["storage"] == "trimmed"
    assert "storage" not in json.loads((padded_root / "cache_config.json").read_text())["text"]
    assert "variable-length" in (trimmed_root / "README.md").read_text()
    assert verify_integrity(trimmed_root).ok
    _assert_same_items(padded_root, trimmed_root)


def test_trimmed_shards_do_not_depend_on_the_unit_split_or_write_blocks(committed, tmp_path, monkeypatch):
    _, trimmed_root, data = committed
    monkeypatch.setattr(commit_module, "_BLOCK_BYTES", 1)  # one-row HDF5 writes
    build_cache(tmp_path / "other", data, unit_size=4, text_storage="trimmed")
    assert [p.read_bytes() for p in _shards(tmp_path / "other")] == [p.read_bytes() for p in _shards(trimmed_root)]
    assert (tmp_path / "other" / "empty_prompt.h5").read_bytes() == (trimmed_root / "empty_prompt.h5").read_bytes()


def test_a_trimmed_row_of_the_wrong_size_fails_verify_and_the_reader(committed, tmp_path):
    root = tmp_path / "cache"
    shutil.copytree(committed[1], root)
    shard = _shards(root)[0]
    with h5py.File(shard, "r+") as handle:
        handle[EMBEDDINGS][0] = np.concatenate([handle[EMBEDDINGS][0], np.ones(3, np.float16)])
    failures = [check.name for check in verify_integrity(root, require_complete=False).failures]
    assert "text_padding" in failures
    with pytest.raises(CacheIntegrityError, match="trimmed text row holds"):
        LatentCacheDataset(root, require_complete=False)[0]


def test_a_real_trimmed_build_reads_back_equal_to_the_padded_build(built_cache, tiny_inputs, tmp_path):
    table, model = tiny_inputs
    root = tmp_path / "trimmed"
    build_quietly(tiny_config(table, root, text_path=model, overrides=("text.storage=trimmed",)))
    assert verify_integrity(root).ok
    _assert_same_items(built_cache, root)
    for padded, trimmed in zip(_shards(built_cache), _shards(root)):  # prompts far shorter than max_length
        assert trimmed.stat().st_size < padded.stat().st_size / 2
