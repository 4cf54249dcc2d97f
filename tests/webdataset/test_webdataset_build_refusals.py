"""What a WebDataset build refuses before any model loads: a root that already holds a cache of another
tokenizer, another sink or other settings (its build records are node-local, so a rerun elsewhere has no
run.json to compare with: the cache at the root is the record), and --extend of a cache at a store URL, which
only a local folder's swap can grow. In-process builds of three tiny clips with the analytic tokenizer, into a
file:// URL."""

from __future__ import annotations

import json

import pytest

from helpers.exec_world import build_args, make_table
from latentforge.builder import run as build_run
from latentforge.cli.main import main

WDS = ("--set", "output.sink=webdataset", "--workers-per-gpu", "0")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wds-refusals")
    table = make_table(folder / "data", count=3)
    url = f"file://{folder / 'cache'}"
    assert main(build_args(table, url, *WDS, "--set", f"output.staging_dir={folder / 'first'}")) == 0
    return folder, table, url


def _objects(folder) -> dict[str, bytes]:
    root = folder / "cache"
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def no_model_work(monkeypatch):
    """Planning is the first step after the checks: reaching it means the refusal came too late."""
    def planned(*args, **kwargs):
        raise AssertionError("the build planned samples before refusing")

    monkeypatch.setattr(build_run, "plan_samples", planned)


def test_a_rerun_elsewhere_with_the_same_settings_keeps_the_cache(built, tmp_path):
    folder, table, url = built
    before = _objects(folder)
    assert main(build_args(table, url, *WDS, "--set", f"output.staging_dir={tmp_path / 'elsewhere'}")) == 0
    assert _objects(folder) == before


@pytest.mark.parametrize("change, named", [
    (("--set", "output.storage_dtype=float32"), "storage_dtype: 'float16' (the cache) vs 'float32' (this build)"),
    (("--set", "output.shard_bytes=1000"), "sink: "),
    (("--set", "frames.fps=12"), "frames: "),
])
def test_a_cache_with_other_settings_is_refused_before_any_model_loads(built, tmp_path, capfd, no_model_work,
                                                                      change, named):
    folder, table, url = built
    before = _objects(folder)
    code = main(build_args(table, url, *WDS, "--set", f"output.staging_dir={tmp_path / 'other'}", *change))
    err = capfd.readouterr().err
    assert code == 1 and f"{url} holds a cache made by another tokenizer or with other settings" in err, err
    assert named in err and "--overwrite" in err, err
    assert _objects(folder) == before


def test_a_cache_of_another_tokenizer_is_refused_naming_both(built, tmp_path, capfd, no_model_work):
    folder, table, _ = built
    copy = tmp_path / "copy"
    copy.mkdir()
    config = json.loads((folder / "cache" / "cache_config.json").read_text())
    config["tokenizer"] = {**config["tokenizer"], "name": "wan2.1", "checkpoint_sha256": "ab" * 32}
    (copy / "cache_config.json").write_text(json.dumps(config))
    code = main(build_args(table, f"file://{copy}", *WDS, "--set", f"output.staging_dir={tmp_path / 'st'}"))
    err = capfd.readouterr().err
    assert code == 1 and "tokenizer.name: 'wan2.1' (the cache) vs 'haar-4x8x8' (this build)" in err, err


def test_an_hdf5_cache_at_the_root_is_refused(built, tmp_path, capfd, no_model_work):
    _, table, _ = built
    root = tmp_path / "hdf5"
    root.mkdir()
    (root / "cache_config.json").write_text(json.dumps({"format": "latentforge-cache", "tokenizer": {}}))
    code = main(build_args(table, str(root), *WDS, "--set", f"output.staging_dir={tmp_path / 'st'}"))
    err = capfd.readouterr().err
    assert code == 1, err
    assert f"{root} holds a cache written by output.sink='hdf5'; refusing to write output.sink='webdataset'" in err


@pytest.mark.parametrize("extra, named", [
    (("--overwrite",), "give one of the two"),
])
def test_extend_refusals_name_what_they_cannot_grow(built, tmp_path, capfd, no_model_work, extra, named):
    _, table, _ = built
    code = main(build_args(table, str(tmp_path / "root"), "--extend", *extra))
    err = capfd.readouterr().err
    assert code == 2 and named in err and "--extend" in err, err
    assert not (tmp_path / "root").exists()


def test_extend_at_a_store_url_is_refused_naming_the_local_folder_way(built, capfd, no_model_work):
    _, table, _ = built
    url = "memory://wds-refusals/cache"
    code = main(build_args(table, url, "--extend", *WDS))
    err = capfd.readouterr().err
    assert code == 2 and f"output.root={url!r} is a store URL" in err and "--extend" in err, err
    assert "in a local folder (--out DIR)" in err and "--overwrite" in err, err
