"""Verbs given a WebDataset cache root: `verify` checks what applies to tar shards (SHA256SUMS against the
objects, markers, tar members against the manifest) at a local folder and at a file:// URL, `inspect`
summarises it, and the verbs that read HDF5 shards refuse it by name with what to do instead (exit 2), as the
two training readers refuse each other's caches."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile

import pytest

from helpers.fake_rows import (
    PLAN_REJECTS,
    empty_prompt_arrays,
    make_cache_config,
    make_samples,
    planned_units,
    stage_units,
)
from latentforge import LatentCacheDataset, StreamingLatentDataset, verify
from latentforge.cli.main import main
from latentforge.errors import ConfigError
from latentforge.sinks.hdf5.commit import commit_cache
from latentforge.sinks.webdataset.commit import WebDatasetOptions, commit_webdataset
from latentforge.transfer import Destination

SHARD_BYTES = 6 * 1152 * 2


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    folder = tmp_path_factory.mktemp("roots")
    units = stage_units(folder / "build", make_samples(), unit_size=6)
    hdf5, wds = folder / "hdf5", folder / "wds"
    commit_cache(hdf5, units, PLAN_REJECTS, make_cache_config(), empty_prompt_arrays(), {}, planned_units(6))
    commit_webdataset(Destination(str(wds)), units, PLAN_REJECTS, make_cache_config(), empty_prompt_arrays(),
                      WebDatasetOptions(folder / "staging", shard_bytes=SHARD_BYTES), planned_units(6))
    return hdf5, wds


def _copy(wds, tmp_path):
    copy = tmp_path / "wds"
    shutil.copytree(wds, copy)
    return copy


def _failed(report) -> dict[str, list[str]]:
    failed: dict[str, list[str]] = {}
    for check in report.failures:
        failed.setdefault(check.name, []).append(check.detail)
    return failed


def test_verify_passes_a_webdataset_cache_at_a_folder_and_at_a_file_url(caches, capsys):
    _, wds = caches
    for root in (str(wds), f"file://{wds}"):
        report = verify(root)
        assert report.ok, report.failures
        names = {check.name for check in report.checks}
        assert {"markers", "sha256sums", "shard_files", "manifest", "samples", "empty_prompt"} <= names
    assert main(["verify", f"file://{wds}"]) == 0
    assert "cache verified" in capsys.readouterr().out


def test_verify_finds_a_changed_tar_a_tar_that_disagrees_with_the_manifest_and_a_missing_marker(caches, tmp_path):
    _, wds = caches
    copy = _copy(wds, tmp_path)
    first = sorted((copy / "shards").iterdir())[0]
    data = bytearray(first.read_bytes())
    data[-2000] ^= 0xFF  # inside the last sample's members or the tar's end: the bytes no longer match
    first.write_bytes(bytes(data))
    assert "sha256sums" in _failed(verify(str(copy)))

    # A tar rewritten with a wrong manifest row, and SHA256SUMS rewritten to match: only the member check sees it.
    shutil.copy(sorted((wds / "shards").iterdir())[0], first)
    with tarfile.open(first) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for member, body in members:
            if member.name == "000000000.json":
                body = body.replace(b'"cache_row":0', b'"cache_row":7')
                member.size = len(body)
            tar.addfile(member, io.BytesIO(body))
    first.write_bytes(out.getvalue())
    sums = (copy / "SHA256SUMS").read_text().splitlines()
    rel = f"shards/{first.name}"
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    (copy / "SHA256SUMS").write_text("".join(f"{digest}  {rel}\n" if line.endswith(rel) else line + "\n"
                                             for line in sums))
    (copy / "_CACHE_COMPLETE").unlink()
    failed = _failed(verify(str(copy)))
    assert "sha256sums" not in failed
    assert any("000000000.json differs from row 0 of manifest.jsonl" in d for d in failed["samples"]), failed
    assert any("_CACHE_COMPLETE is missing" in d for d in failed["markers"])
    assert verify(str(copy), require_complete=False).failures and "markers" not in _failed(
        verify(str(copy), require_complete=False))


def test_megatron_energons_index_is_noted_not_failed_and_nothing_else_unlisted_passes(caches, tmp_path):
    """`energon prepare ROOT` writes ROOT/.nv-meta/ and a `<tar>.idx` beside every tar it indexes (Megatron-Energon's
    flavors/webdataset/config.py and itar.py; bench/tools/energon_prepare.py runs the real one)."""
    _, wds = caches
    copy = _copy(wds, tmp_path)
    (copy / ".nv-meta").mkdir()
    for name in (".info.yaml", "split.yaml", "dataset.yaml"):
        (copy / ".nv-meta" / name).write_text("written by energon prepare\n")
    tars = sorted((copy / "shards").glob("*.tar"))
    for tar in tars:
        tar.with_suffix(".tar.idx").write_bytes(b"\0" * 16)
    for root in (str(copy), f"file://{copy}"):
        report = verify(root)
        assert report.ok, report.failures
        assert [(w.name, w.detail.split(":")[0]) for w in report.warnings] == [
            ("reader_index", f".nv-meta/ (3 files) and {len(tars)} <tar>.idx file(s) beside the tars")]

    strays = [".nv-meta-old/split.yaml", "shards/part-99999-of-99999-000000000-000000001.tar.idx", "notes.txt",
              "empty_prompt.idx"]
    for stray in strays:
        (copy / stray).parent.mkdir(exist_ok=True)
        (copy / stray).write_text("x")
    failed = _failed(verify(str(copy)))
    assert sorted(failed) == ["sha256sums"]
    assert failed["sha256sums"] == [f"{stray}: present but not listed in SHA256SUMS" for stray in sorted(strays)]


def test_inspect_summarises_a_webdataset_cache(caches, capsys):
    _, wds = caches
    assert main(["inspect", f"file://{wds}"]) == 0
    out = capsys.readouterr().out
    assert "complete" in out and "format    webdataset" in out
    shards = len(list((wds / "shards").iterdir()))
    assert f"in {shards} shard(s)" in out


@pytest.mark.parametrize("name,damage", [("rejects.jsonl", b'{"sample_id": "x", "rea'),
                                         ("manifest.jsonl", b"\xff\xfe not a manifest\n")])
def test_inspect_refuses_a_damaged_webdataset_cache_in_one_line(caches, tmp_path, cli, name, damage):
    copy = _copy(caches[1], tmp_path)
    (copy / name).write_bytes(damage)
    done = cli(["inspect", f"file://{copy}"])
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert f"{copy}/{name} is damaged" in done.stderr and "rebuild the cache, or fetch it again" in done.stderr


@pytest.mark.parametrize("verb", [["stats"], ["preview"], ["export", "--to", "pt-dicts", "OUT"], ["verify", "--deep"],
                                  ["query", "dataset_index < 3"]])
def test_verbs_that_read_hdf5_shards_refuse_a_webdataset_root_naming_it(caches, verb, tmp_path, capsys):
    _, wds = caches
    args = [verb[0], str(wds), *[str(tmp_path / "out") if a == "OUT" else a for a in verb[1:]]]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"config error: {wds} is a" in err and "webdataset" in err.lower() and "hdf5" in err.lower(), err
    assert len(err.strip().splitlines()) == 1, err


def test_verbs_refuse_an_hdf5_cache_at_a_url_pointing_at_fetch(caches, capsys):
    hdf5, _ = caches
    for verb in (["verify"], ["inspect"], ["stats"], ["preview"], ["export", "--to", "pt-dicts", "out"],
                 ["query", "dataset_index < 3"]):
        assert main([verb[0], f"file://{hdf5}", *verb[1:]]) == 2
        err = capsys.readouterr().err
        assert f"file://{hdf5} is a URL" in err and "latentforge fetch" in err, err


def test_each_training_reader_refuses_the_other_readers_cache_by_name(caches):
    hdf5, wds = caches
    with pytest.raises(ConfigError, match=f"{hdf5} is not a WebDataset cache.*LatentCacheDataset"):
        StreamingLatentDataset(str(hdf5))
    with pytest.raises(ConfigError, match=f"{wds} is a webdataset cache.*cache_dataset"):
        LatentCacheDataset(wds)
    with pytest.raises(ConfigError, match="is a URL.*StreamingLatentDataset"):
        LatentCacheDataset(f"file://{wds}")
