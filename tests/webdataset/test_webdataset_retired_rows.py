"""A local WebDataset commit after an earlier one whose staged units were retired (their arrays only in its tars):
the full old tars stay as they are, and the rows of the old last tar come back from it, text rows trimmed there
zero-padded again, so the cache reads as a fresh commit of every unit reads."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers.fake_rows import (
    LATENT_SHAPE,
    PLAN_REJECTS,
    empty_prompt_arrays,
    make_cache_config,
    make_samples,
    planned_units,
    stage_units,
)
from helpers.swap_readers import file_identities
from latentforge import StreamingLatentDataset, verify
from latentforge.sinks.webdataset import published_tars
from latentforge.sinks.webdataset.commit import WebDatasetOptions, commit_webdataset
from latentforge.staging.staged_units import completed_units, retire_staged_units, sidecar_path
from latentforge.transfer import Destination

SHARD_BYTES = 4 * int(np.prod(LATENT_SHAPE)) * 2  # four float16 latents: a tar closes at its fourth sample
FIRST_UNITS = 2  # committed and retired first: 10 samples, tars of 4, 4 and 2


def _commit(root: Path, unit_paths: list[Path], planned: dict, options: WebDatasetOptions, records: Path | None):
    return commit_webdataset(Destination(str(root)), unit_paths, PLAN_REJECTS, make_cache_config(),
                             empty_prompt_arrays(), options, planned, records=records)


def _items(root: Path) -> list[dict]:
    return [{k: v for k, v in item.items() if k not in ("stream", "stream_index")}
            for item in StreamingLatentDataset(str(root))]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """Every unit committed at once."""
    folder = tmp_path_factory.mktemp("retired-fresh")
    units = stage_units(folder / "build", make_samples(), unit_size=6)
    _commit(folder / "wds", units, planned_units(6), WebDatasetOptions(folder / "tars", SHARD_BYTES), None)
    return folder / "wds"


@pytest.mark.parametrize("recorded", [True, False], ids=["stats-recorded", "stats-lost"])
def test_a_commit_after_retired_units_keeps_the_full_tars_and_reads_the_rest_back(fresh, tmp_path, monkeypatch,
                                                                                 recorded):
    records, root, options = tmp_path / "build", tmp_path / "wds", WebDatasetOptions(tmp_path / "tars", SHARD_BYTES)
    stage_units(records, make_samples(), unit_size=6)
    first = {unit: sources for unit, sources in planned_units(6).items() if unit < FIRST_UNITS}
    _commit(root, [completed_units(records)[unit] for unit in first], first, options, records)
    later = [completed_units(records)[unit] for unit in planned_units(6) if unit >= FIRST_UNITS]
    aside = tmp_path / "aside"
    aside.mkdir()
    for path in later:  # staged after the first commit: not retired by it
        for file in (path, sidecar_path(path)):
            shutil.move(file, aside / file.name)
    retire_staged_units(records)
    for file in aside.iterdir():
        shutil.move(file, records / "staging" / file.name)
    assert sorted(p.name for p in (root / "shards").iterdir()) == [
        "part-00000-of-00003-000000000-000000004.tar", "part-00001-of-00003-000000004-000000008.tar",
        "part-00002-of-00003-000000008-000000010.tar"]
    before = file_identities(root)
    if recorded:  # the tars are trusted by the size and mtime their commit recorded: none is read whole
        monkeypatch.setattr(published_tars, "sha256_file", lambda path: pytest.fail(f"{path} was read whole"))
    else:
        (records / "tar_stats.json").unlink()

    result = _commit(root, list(completed_units(records).values()), planned_units(6), options, records)
    kept = ["shards/part-00000-of-00003-000000000-000000004.tar", "shards/part-00001-of-00003-000000004-000000008.tar"]
    assert [rel for rel in result.kept if rel.startswith("shards/")] == kept
    assert all(file_identities(root)[rel] == before[rel] for rel in kept)
    assert "shards/part-00002-of-00003-000000008-000000010.tar" not in file_identities(root)
    assert verify(str(root)).ok
    items, want_items = _items(root), _items(fresh)
    assert [item["sample_id"] for item in items] == [item["sample_id"] for item in want_items]
    for got, want in zip(items, want_items):
        assert got.keys() == want.keys()
        for key, value in want.items():
            assert (got[key] == value).all() if hasattr(value, "shape") else got[key] == value, key
    rewritten = sorted(p.name for p in (root / "shards").iterdir() if f"shards/{p.name}" not in kept)
    assert rewritten and all((root / "shards" / name).read_bytes() == (fresh / "shards" / name).read_bytes()
                             for name in rewritten)  # the old last tar's rows, read back, written as a fresh commit


@pytest.mark.parametrize("count", [0, 1, 4])
def test_verify_takes_a_smaller_shard_count_from_a_kept_tar_but_no_other(tmp_path, count):
    """A tar kept by an --extend names the shard count of the commit that wrote it: at most the cache's, and more
    than its own index; the rest of the name must follow as before."""
    units = stage_units(tmp_path / "build", make_samples(), unit_size=6)
    root = tmp_path / "wds"
    _commit(root, units, planned_units(6), WebDatasetOptions(tmp_path / "tars", SHARD_BYTES), None)
    old = sorted((root / "shards").iterdir())[1]
    assert old.name.startswith("part-00001-of-00006-")
    new = old.with_name(old.name.replace("-of-00006-", f"-of-{count:05d}-"))
    old.rename(new)
    sums = root / "SHA256SUMS"
    sums.write_text(sums.read_text().replace(old.name, new.name))
    failed = {check.name: check.detail for check in verify(str(root)).failures}
    assert ("shard_files" in failed) == (count != 4), failed
