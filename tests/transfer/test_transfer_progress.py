"""publish and fetch count progress in bytes per step, each moved file's event says why it moved, and the verbs
end by naming the destination and the byte totals."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich.filesize import decimal

from helpers.progress import ProgressRecorder
from latentforge.transfer import Destination, FetchOptions, PublishOptions, TransferEvent, fetch, publish


def _sizes(root: Path) -> dict[str, int]:
    """Bytes of every file publish sends: all under ROOT but build/ and _SUCCESS."""
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*")
            if p.is_file() and "build" not in p.relative_to(root).parts and p.name != "_SUCCESS"}


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def test_publish_counts_bytes_and_each_upload_says_why(cache, tmp_path):
    sizes = _sizes(cache)
    listed = sum(size for rel, size in sizes.items() if rel not in ("SHA256SUMS", "_CACHE_COMPLETE"))
    dest = tmp_path / "dest"
    events: list[TransferEvent] = []
    recorder = ProgressRecorder()
    totals, done, progress = recorder.totals, recorder.done, recorder
    report = publish(cache, [Destination(f"file://{dest}")],
                     PublishOptions(workers=3, on_event=events.append, progress=progress))
    everything = sum(sizes.values())
    assert report.bytes_per_destination == everything
    assert totals == {"hash": listed, "check": everything, "upload": everything, "confirm": everything}
    assert done == Counter(totals)
    uploaded = [e for e in events if e.action == "uploaded"]
    assert sorted(e.path for e in uploaded) == sorted(sizes)
    assert {e.reason for e in uploaded} == {"missing at destination"}

    _flip_a_byte(dest / "manifest.jsonl")
    events.clear()
    recorder = ProgressRecorder()
    totals, done, progress = recorder.totals, recorder.done, recorder
    publish(cache, [Destination(f"file://{dest}")], PublishOptions(on_event=events.append, progress=progress))
    assert totals["upload"] == sizes["manifest.jsonl"] and done == Counter(totals)
    (again,) = [e for e in events if e.action == "uploaded"]
    assert again.path == "manifest.jsonl" and again.reason.startswith("checksum differs")


def test_fetch_counts_bytes_and_each_download_says_why(cache, tmp_path):
    dest = tmp_path / "dest"
    publish(cache, [Destination(f"file://{dest}")])
    sizes = _sizes(dest)
    listed = {rel: size for rel, size in sizes.items() if rel not in ("SHA256SUMS", "_CACHE_COMPLETE")}
    out = tmp_path / "out"
    events: list[TransferEvent] = []
    recorder = ProgressRecorder()
    totals, done, progress = recorder.totals, recorder.done, recorder
    report = fetch(Destination(f"file://{dest}"), out, FetchOptions(workers=2, on_event=events.append,
                                                                      progress=progress))
    assert totals == {"check": 0, "download": sum(listed.values())} and done == Counter(totals)
    assert report.bytes_downloaded == sum(listed.values())
    assert sorted(e.path for e in events) == sorted(listed) and {e.reason for e in events} == {"missing locally"}

    _flip_a_byte(out / "manifest.jsonl")
    events.clear()
    recorder = ProgressRecorder()
    totals, done, progress = recorder.totals, recorder.done, recorder
    fetch(Destination(f"file://{dest}"), out, FetchOptions(on_event=events.append, progress=progress))
    assert totals == {"check": sum(listed.values()), "download": listed["manifest.jsonl"]}
    assert done == Counter(totals)
    assert [(e.path, e.reason) for e in events] == [("manifest.jsonl", "local copy differs from SHA256SUMS")]


def test_cli_publish_and_fetch_name_where_and_how_much(cache, tmp_path, cli):
    total = decimal(sum(_sizes(cache).values()))
    url = f"file://{tmp_path / 'dest'}"
    done = cli(["publish", str(cache), url])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "missing at destination" in done.stderr and "MB/s" in done.stderr
    assert f"published {cache} ({total}) to {url}" in done.stdout

    out = tmp_path / "out"
    done = cli(["fetch", url, str(out)])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "missing locally" in done.stderr
    assert f"fetched {url} into {out}" in done.stdout and "SHA256SUMS check passed" in done.stdout
