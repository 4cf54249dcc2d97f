"""Integrity verify: each tamper fails a named check at the right dataset_index; sha256sum agrees."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.fake_rows import build_cache
from latentforge.cache.checksums import find_sum_problems, write_sha256sums
from latentforge.sinks.hdf5.integrity import verify_integrity

SHARD_1 = "shards/part-00001-of-00003-000000008-000000016.h5"  # dataset_index 8..15


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("pristine") / "root"
    build_cache(root)
    return root


@pytest.fixture
def cache(pristine, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(pristine, root)
    return root


def _failures(root: Path) -> dict[str, list[int | None]]:
    report = verify_integrity(root)
    assert not report.ok
    found: dict[str, list[int | None]] = {}
    for check in report.failures:
        found.setdefault(check.name, []).append(check.dataset_index)
    return found


def check_sha256sums(root: Path) -> list[str]:
    return [str(problem) for problem in find_sum_problems(root)]


def _coreutils_ok(root: Path) -> bool:
    return subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=root, capture_output=True).returncode == 0


def test_fresh_cache_passes_every_check(pristine):
    report = verify_integrity(pristine)
    assert report.ok, report.failures
    assert {c.name for c in report.checks} == {
        "markers", "root_layout", "cache_config", "shard_files", "sha256sums", "manifest", "shard_readable",
        "shard_datasets", "source_index", "latents_finite", "text_finite", "text_padding", "empty_prompt", "rejects",
        "counts", "encoded_by", "manifest_table"}
    assert check_sha256sums(pristine) == [] and _coreutils_ok(pristine)


def test_flipped_byte_in_a_shard(cache):
    with h5py.File(cache / SHARD_1, "r") as shard:  # a byte inside row 3's latent chunk
        offset = shard["perception_latent_state"].id.get_chunk_info(3).byte_offset + 100
    with open(cache / SHARD_1, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0x10]))
    assert _failures(cache) == {"sha256sums": [8]}
    assert not _coreutils_ok(cache)
    assert check_sha256sums(cache) == [f"{SHARD_1}: sha256 differs from SHA256SUMS"]


def test_truncated_shard(cache):
    size = (cache / SHARD_1).stat().st_size
    with open(cache / SHARD_1, "r+b") as handle:
        handle.truncate(size - 5000)
    found = _failures(cache)
    assert found["sha256sums"] == [8] and found["shard_readable"] == [8] and not _coreutils_ok(cache)


def test_missing_shard(cache):
    (cache / SHARD_1).unlink()
    found = _failures(cache)
    assert found["shard_files"] == [8] and found["sha256sums"] == [8]
    assert f"{SHARD_1}: listed in SHA256SUMS but missing" in check_sha256sums(cache)


def test_removed_manifest_row_with_sums_rewritten(cache):
    lines = (cache / "manifest.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    del lines[5]
    (cache / "manifest.jsonl").write_text("".join(lines), encoding="utf-8")
    write_sha256sums(cache)  # as a buggy build would, after the damage
    assert _coreutils_ok(cache)
    found = _failures(cache)
    # manifest.parquet still holds the removed row, so the index no longer matches the manifest either
    assert set(found) == {"manifest", "manifest_table"} and found["manifest"][0] == 5


def test_nan_in_a_latent_with_sums_rewritten(cache):
    with h5py.File(cache / SHARD_1, "r+") as shard:
        shard["perception_latent_state"][3, 7, 1, 2, 2] = np.nan
    write_sha256sums(cache)
    assert _failures(cache) == {"latents_finite": [11]}


def test_wrong_dataset_shape_with_sums_rewritten(cache):
    path = cache / SHARD_1
    with h5py.File(path, "r") as shard:
        arrays = {name: ds[()] for name, ds in shard.items()}
    arrays["perception_latent_state"] = arrays["perception_latent_state"][:, :, :, :, :7]
    path.unlink()
    with h5py.File(path, "w") as shard:
        for name, array in arrays.items():
            shard.create_dataset(name, data=array, chunks=(1, *array.shape[1:]))
    write_sha256sums(cache)
    found = _failures(cache)
    assert found == {"shard_datasets": [8]}
    detail = next(c.detail for c in verify_integrity(cache).failures)
    assert "perception_latent_state" in detail and "(8, 48, 3, 6, 7)" in detail


def test_text_padding_and_empty_prompt_with_sums_rewritten(cache):
    with h5py.File(cache / SHARD_1, "r+") as shard:
        length = int(shard["t5_text_length"][6])
        shard["t5_text_embeddings"][6, length - 1 if length == 16 else length, 0] = 1.0
        shard["t5_text_length"][6] = min(length, 15)
    with h5py.File(cache / "empty_prompt.h5", "r+") as empty:
        empty["t5_text_embeddings"][0, 5, 3] = np.inf
    write_sha256sums(cache)
    found = _failures(cache)
    assert found["text_padding"][0] == 14 and found["text_finite"] == [None] and set(found) <= {
        "text_padding", "text_finite"}


def test_markers_unlisted_files_and_rejects(cache):
    (cache / "_SUCCESS").write_text("")
    (cache / "_CACHE_COMPLETE").unlink()
    assert verify_integrity(cache, require_complete=False).failures[0].name == "markers"
    (cache / "_CACHE_COMPLETE").write_text("")
    assert verify_integrity(cache).ok  # markers are not checksummed
    (cache / "notes.txt").write_text("added after the build")
    (cache / "rejects.jsonl").write_text((cache / "rejects.jsonl").read_text().replace("too_short", "too_blurry"))
    found = _failures(cache)
    assert set(found) == {"sha256sums", "root_layout", "rejects"}
    assert "notes.txt: present but not listed in SHA256SUMS" in check_sha256sums(cache)
