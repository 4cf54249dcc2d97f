"""Every verb that reads a cache works on one caught inside a commit's swap: the whole new cache in build/swap, the
root holding files of both (here the new cache_config.json beside the old, shorter manifest, as an extend's swap
leaves them before manifest.jsonl moves in). Each reads build/swap, so each sees the whole new cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from latentforge.cache.generation_swap import finish_swap, next_generation, swap_folder
from latentforge.cache.layout import MANIFEST, MANIFEST_TABLE, PUBLISHED_MARKER, RUN_RECORDS_DIR, SWAP_GENERATION
from latentforge.cli.main import main
from latentforge.errors import CacheIntegrityError
from latentforge.export import export_cache
from latentforge.report.preview import preview
from latentforge.report.stats_report import stats
from latentforge.sinks.hdf5.structure import check_cache_structure
from latentforge.sinks.manifest_query import query_rows
from latentforge.transfer import Destination, publish
from latentforge.verification.entry import verify


def _caught_mid_swap(root: Path) -> int:
    """Put the cache at `root` into build/swap whole (hard links, as a commit's reused shards are) and leave the
    root's manifest as an older, one-row cache's, without its table; the samples the whole cache holds."""
    folder = next_generation(root)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirnames.remove(RUN_RECORDS_DIR)
        (folder / here.relative_to(root)).mkdir(exist_ok=True)
        for name in filenames:
            os.link(here / name, folder / here.relative_to(root) / name)
    os.rename(folder, swap_folder(root))
    lines = (root / MANIFEST).read_text(encoding="utf-8").splitlines(keepends=True)
    (root / MANIFEST).unlink()  # a new file, not the link build/swap holds
    (root / MANIFEST).write_text(lines[0], encoding="utf-8")
    (root / MANIFEST_TABLE).unlink()
    return len(lines)


@pytest.fixture
def mid_swap(cache) -> tuple[Path, int]:
    return cache, _caught_mid_swap(cache)


def test_the_root_alone_would_not_read_as_a_cache(mid_swap):
    """What the verbs below would meet without build/swap: a manifest that disagrees with cache_config.json."""
    root, _ = mid_swap
    with pytest.raises(CacheIntegrityError):
        check_cache_structure(root)


def test_verify_inspect_and_query_read_the_swap(mid_swap, capsys):
    root, samples = mid_swap
    report = verify(root)
    assert report.ok, [(c.name, c.detail) for c in report.failures]
    assert len(query_rows(root, "dataset_index >= 0")) == samples
    assert main(["inspect", str(root), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["root"] == str(root) and shown["num_samples"] == samples


def test_stats_and_export_read_the_swap(mid_swap, tmp_path):
    root, samples = mid_swap
    report = stats(root, tmp_path / "stats")
    assert report.stats.num_samples == samples
    assert report.written and all(path.is_relative_to(tmp_path) for path in report.written)
    exported = export_cache(root, "pt-dicts", tmp_path / "export")
    assert exported.samples == samples and exported.written >= samples


def test_preview_reads_the_swap(mid_swap, tmp_path):
    root, samples = mid_swap
    made = preview(root, indices=[samples - 1], out=tmp_path)  # a row only the whole manifest holds
    assert made.dataset_indices == [samples - 1] and made.video.stat().st_size > 0


def test_publish_reads_the_swap_and_its_success_marker_moves_in_with_the_cache(mid_swap, tmp_path):
    root, samples = mid_swap
    report = publish(root, [Destination(str(tmp_path / "published"))])
    assert report.root == root
    assert (swap_folder(root) / PUBLISHED_MARKER).is_file()
    published = (tmp_path / "published" / MANIFEST).read_text(encoding="utf-8").splitlines()
    assert len(published) == samples  # the whole new manifest, not the root's old one
    finish_swap(root)
    assert not (root / RUN_RECORDS_DIR / SWAP_GENERATION).exists()
    assert (root / PUBLISHED_MARKER).is_file() and verify(root).ok
