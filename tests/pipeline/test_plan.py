"""plan: order, windows, duplicates, limit, fingerprints, hostile ids; and the output-size estimate."""

from __future__ import annotations

import json
import os
import re
import unicodedata

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest

from latentforge.builder.estimate import check_free_disk, estimate_output_bytes
from latentforge.config import DatasetConfig
from latentforge.errors import LatentforgeError
from latentforge.pipeline.plan import diff_fingerprints, make_plan, plan_fingerprint, write_plan
from latentforge.readers.table import TableOptions, TableReader
from latentforge.records import SourceEntry


def _entry(key, video=None, caption="c"):
    video = video or f"/data/{key}.mp4"
    return SourceEntry(key=key, video=video, video_rel=os.path.basename(video), caption=caption)


def test_order_is_codepoint_order_and_source_index_is_position():
    keys = ["b", "B", "a", "é", "Z", "a b", "a_b", "10", "9", "ä"]
    samples, rejects = make_plan([_entry(k) for k in keys], None)
    # reference order: tuples of code points, not locale collation (which would put "é" next to "e")
    assert [s.sample_id for s in samples] == sorted(keys, key=lambda s: [ord(c) for c in s])
    assert [s.source_index for s in samples] == list(range(len(keys)))
    assert all(s.start_frame is None for s in samples) and rejects == []


def test_windows_suffix_only_several_starts():
    starts = {"multi": [0, 16, 32], "single": [8], "none": None, "short": []}
    entries = [_entry(k) for k in starts]
    samples, rejects = make_plan(entries, lambda e: starts[e.key])
    assert [(s.sample_id, s.start_frame) for s in samples] == [
        ("multi@0", 0), ("multi@16", 16), ("multi@32", 32), ("none", None), ("single", 8)]
    assert [(r.sample_id, r.reason, r.stage, r.source_index) for r in rejects] == [("short", "too_short", "plan", -1)]
    with pytest.raises(LatentforgeError, match="distinct"):
        make_plan(entries[:1], lambda e: [0, 0])


def test_windows_sort_by_their_start_frame_as_a_number():
    starts = {"long": [1008, 48, 0, 2016], "long_b": [0, 16], "lo": None}
    samples, _ = make_plan([_entry(k) for k in starts], lambda e: starts[e.key])
    assert [s.sample_id for s in samples] == ["lo", "long@0", "long@48", "long@1008", "long@2016", "long_b@0",
                                              "long_b@16"]
    assert [s.sample_id for s in make_plan([_entry(k) for k in starts], lambda e: starts[e.key], limit=3)[0]] == \
        ["lo", "long@0", "long@48"]


def test_duplicates_keep_the_first_in_listing_order():
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    entries = [_entry("x", "/d/first.mp4"), _entry(nfd, "/d/nfd.mp4"), _entry("x", "/d/second.mp4"),
               _entry(nfc, "/d/nfc.mp4")]
    samples, rejects = make_plan(entries, None)
    assert [(s.sample_id, s.entry.video) for s in samples] == [("caf\u00e9", "/d/nfd.mp4"), ("x", "/d/first.mp4")]
    assert [(r.sample_id, r.reason) for r in rejects] == [(nfc, "duplicate_id"), ("x", "duplicate_id")]
    assert "entry 3 (nfc.mp4)" in rejects[0].detail and "entry 1 (nfd.mp4)" in rejects[0].detail
    assert "second.mp4" in rejects[1].detail and "first.mp4" in rejects[1].detail


def test_limit_keeps_the_first_after_sorting():
    entries = [_entry(k) for k in ["d", "a", "c", "b", "a", "d"]]
    samples, rejects = make_plan(entries, None, limit=2)
    assert [s.sample_id for s in samples] == ["a", "b"]
    assert [r.sample_id for r in rejects] == ["a"]  # the duplicate "d" lies beyond the limit
    assert make_plan(entries, None, limit=0) == ([], [])


def test_fingerprint_reports_added_removed_changed(tmp_path):
    for name in "abc":
        (tmp_path / f"{name}.mp4").write_bytes(b"v" * 10)
    entries = [_entry(n, str(tmp_path / f"{n}.mp4")) for n in "abc"]
    old = plan_fingerprint(make_plan(entries, None)[0])
    assert diff_fingerprints(old, plan_fingerprint(make_plan(entries, None)[0])) is None
    assert json.loads(json.dumps(old)) == old  # stored in JSON by the build

    (tmp_path / "b.mp4").write_bytes(b"v" * 11)  # same name, new content
    (tmp_path / "d.mp4").write_bytes(b"v")
    changed = [entries[0], entries[1], _entry("d", str(tmp_path / "d.mp4"))]
    diff = diff_fingerprints(old, plan_fingerprint(make_plan(changed, None)[0]))
    assert diff.startswith("1 added, 1 removed, 1 changed") and "'d'" in diff and "'c'" in diff and "'b'" in diff

    recaptioned = [entries[0], entries[1], SourceEntry("c", entries[2].video, "c.mp4", "new caption")]
    new = plan_fingerprint(make_plan(recaptioned, None)[0])
    assert diff_fingerprints(plan_fingerprint(make_plan(entries[:2] + [entries[2]], None)[0]), new).startswith(
        "0 added, 0 removed, 1 changed")


def _walk(folder):
    return {os.path.join(d, n) for d, dirs, files in os.walk(folder) for n in dirs + files}


def test_hostile_ids_never_leave_the_build_folder(tmp_path):
    hostile = ["a/b", "..", "../../etc", "../../../passwd", "with space", "/abs/olute", "ünïcödé",
               unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café"), "x" * 300, "é" * 200,
               "nul\x00byte", "new\nline"]
    pa_csv.write_csv(pa.table({"id": hostile, "video": [f"v{i}.mp4" for i in range(len(hostile))],
                               "caption": ["c"] * len(hostile)}), tmp_path / "t.csv")
    entries = TableReader(DatasetConfig(reader="table", path=[str(tmp_path / "t.csv")],
                                        options=TableOptions(id_column="id"))).entries()
    samples, rejects = make_plan(entries, None)
    nfc_ids = {unicodedata.normalize("NFC", h) for h in hostile}
    assert {s.sample_id for s in samples} == nfc_ids and len(samples) == len(hostile) - 1  # NFD = NFC: one id
    assert [r.reason for r in rejects] == ["duplicate_id"]

    root = tmp_path / "ROOT"
    (root / "build").mkdir(parents=True)
    outside_before = set(os.listdir(tmp_path.parent))
    before = _walk(tmp_path)
    write_plan(root / "build", samples, rejects)
    created = _walk(tmp_path) - before
    assert created == {str(root / "build" / n) for n in ("plan.jsonl", "plan_rejects.jsonl", "fingerprint.json")}
    assert set(os.listdir(tmp_path.parent)) == outside_before
    rows = [json.loads(line) for line in (root / "build" / "plan.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["sample_id"] for r in rows] == sorted(nfc_ids)  # ids survive intact inside the file
    fingerprint = json.loads((root / "build" / "fingerprint.json").read_text(encoding="utf-8"))
    assert fingerprint["count"] == len(samples) and set(fingerprint["entries"]) == nfc_ids


def _write_shard(path, n, latent, text, dtype):
    # the shard layout of docs/cache-format.md, written with h5py directly (not our writer)
    datasets = [("video_latent_state", latent, dtype), ("source_index", (), "i8")]
    if text is not None:
        datasets += [("t5_text_embeddings", text, dtype), ("t5_text_length", (), "u2")]
    with h5py.File(path, "w") as f:
        for name, shape, kind in datasets:
            data = f.create_dataset(name, shape=(n, *shape), dtype=kind, chunks=(1, *shape) if shape else (1,),
                                    track_times=False)
            data[...] = np.ones(data.shape, dtype=kind)
        return sum(f[k].id.get_storage_size() for k in f)


@pytest.mark.parametrize("text, dtype, storage", [((32, 64), "f2", "float16"), (None, "f4", "float32")])
def test_estimate_bounds_a_real_shard(tmp_path, text, dtype, storage):
    latent, n = (16, 3, 6, 8), 40
    stored = _write_shard(tmp_path / "s.h5", n, latent, text, dtype)
    itemsize = np.dtype(dtype).itemsize
    row = np.prod(latent) * itemsize + 8 + (np.prod(text) * itemsize + 2 if text else 0)
    assert stored == n * row  # h5py's own count of the data bytes
    size = os.path.getsize(tmp_path / "s.h5")
    estimate = estimate_output_bytes(n, latent, text, storage)
    assert size < estimate < size + n * 4096 + (2 << 20)  # an upper bound, not a wild one
    assert estimate_output_bytes(2 * n, latent, text, storage) - estimate > stored


def test_check_free_disk(tmp_path):
    stats = os.statvfs(tmp_path)
    free = stats.f_bavail * stats.f_frsize  # reference: statvfs, not shutil
    check_free_disk(tmp_path / "not" / "yet", needed_bytes=1, margin_bytes=0)
    with pytest.raises(LatentforgeError) as error:
        check_free_disk(tmp_path / "not" / "yet", needed_bytes=free, margin_bytes=1 << 30)
    message = str(error.value)
    assert str(tmp_path) in message and f"({free} bytes)" in message.split("plus")[0] and "min_free_bytes" in message
    reported = int(re.search(r"has [0-9.]+ GiB \((\d+) bytes\) free", message).group(1))
    assert abs(reported - free) < 64 << 20  # other processes may write meanwhile
