"""A sink defined in this file, registered as a plug-in, touching no file of the package: `latentforge build` commits
through it, and verify, inspect, `cache_dataset` and the verbs that need HDF5 shards find it from what its
cache_config.json records and dispatch to it."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from helpers.exec_world import build_args, make_table
from latentforge import registry
from latentforge.cache.check_report import CheckRecorder, VerifyReport
from latentforge.cache.config_file import CacheConfig
from latentforge.cache.layout import CACHE_CONFIG, COMPLETE_MARKER
from latentforge.cache.root import CacheRoot
from latentforge.cache.summary import CacheSummary, ShardFile
from latentforge.config.schema import OutputConfig
from latentforge.dataset import LatentCacheDataset, cache_dataset
from latentforge.sinks.base import Sink, SinkCommit, StagedCache
from latentforge.staging.gather import gather_staged, ordered_rejects, planned_count
from latentforge.staging.staged_units import open_staged_unit

SAMPLES = "samples"  # ROOT/samples/<dataset_index>.npy, one latent each
SUMS = "sums.json"


class NpyFolderSink(Sink):
    """One .npy file per sample and a JSON of their SHA-256: the smallest format a trainer could read."""

    name = "npy-folder"

    @staticmethod
    def commit(output: OutputConfig, build_dir: Path, staged: StagedCache) -> SinkCommit:
        root = Path(output.root)
        (root / SAMPLES).mkdir(parents=True, exist_ok=True)
        schema = staged.cache_config.shard_schema()
        placed, unit_rejects, encoded_by = gather_staged(schema, staged.unit_paths, staged.planned)
        sums = {}
        for index, row in enumerate(placed):
            with open_staged_unit(row.unit_path) as unit:
                latent = np.asarray(unit.latents[row.position])
            path = root / SAMPLES / f"{index:06d}.npy"
            np.save(path, latent)
            sums[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        rejects = ordered_rejects(staged.plan_rejects, unit_rejects)
        config = staged.cache_config.committed(len(placed), len(placed), encoded_by,
                                               planned_count(staged.planned, staged.plan_rejects), len(rejects))
        (root / CACHE_CONFIG).write_text(json.dumps({**config.to_json(), "sink": NpyFolderSink.record(output)}))
        (root / SUMS).write_text(json.dumps(sums))
        (root / COMPLETE_MARKER).write_text("{}\n")
        return SinkCommit(len(placed), dict(sorted(Counter(r.reason for r in rejects).items())))

    @classmethod
    def verify(cls, root: CacheRoot, require_complete: bool, progress: Any) -> VerifyReport:
        folder, rec = Path(str(root)), CheckRecorder()
        for name, digest in json.loads((folder / SUMS).read_text()).items():
            if hashlib.sha256((folder / SAMPLES / name).read_bytes()).hexdigest() != digest:
                rec.fail("samples", f"{name} differs from {SUMS}")
        rec.close("samples", "every sample file as summed")
        return rec.report

    @classmethod
    def inspect(cls, root: CacheRoot) -> CacheSummary:
        folder = Path(str(root))
        config = json.loads((folder / CACHE_CONFIG).read_text())
        files = sorted((folder / SAMPLES).iterdir())
        return CacheSummary(root=folder, config=CacheConfig.from_json(config), complete=True, published=False,
                            manifest_rows=len(files), rejects={},
                            shards=[ShardFile(f"{SAMPLES}/{p.name}", i, i + 1, p.stat().st_size)
                                    for i, p in enumerate(files)],
                            datasets={"sink": config["sink"]}, empty_prompt=None)

    @classmethod
    def dataset(cls, root: CacheRoot, **options: Any) -> list[torch.Tensor]:
        return [torch.from_numpy(np.load(p)) for p in sorted((Path(str(root)) / SAMPLES).iterdir())]


@pytest.fixture
def plugin(monkeypatch):
    monkeypatch.setattr(registry, "_PLUGINS", {kind: dict(table) for kind, table in registry._PLUGINS.items()})
    registry.register("sink", NpyFolderSink.name, NpyFolderSink)


def test_a_plugin_sink_builds_verifies_inspects_and_feeds_a_dataset(plugin, tmp_path, cli):
    table = make_table(tmp_path / "world", count=5)
    ours, hdf5 = tmp_path / "npy", tmp_path / "hdf5"
    assert cli(build_args(table, ours, "--set", "output.sink=npy-folder")).returncode == 0
    assert cli(build_args(table, hdf5)).returncode == 0
    assert json.loads((ours / CACHE_CONFIG).read_text())["sink"] == {"name": "npy-folder"}

    verified = cli(["verify", str(ours)])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "every sample file as summed" in verified.stdout
    inspected = cli(["inspect", str(ours), "--json"])
    assert inspected.returncode == 0, inspected.stderr
    summary = json.loads(inspected.stdout)
    assert summary["num_samples"] == 5 and summary["datasets"]["sink"]["name"] == "npy-folder"
    assert "format    npy-folder" in cli(["inspect", str(ours)]).stdout

    # the plug-in's Dataset holds the latents the HDF5 sink committed from the same input, row for row
    latents = cache_dataset(ours)
    reference = LatentCacheDataset(hdf5, text=False)
    assert len(latents) == len(reference) == 5
    for i, latent in enumerate(latents):
        assert torch.equal(latent, reference[i]["latent"])

    # its verify is the one that runs: a changed sample file fails it
    sample = ours / SAMPLES / "000002.npy"
    sample.write_bytes(sample.read_bytes()[:-1] + b"\x01")
    tampered = cli(["verify", str(ours)])
    assert tampered.returncode == 1 and "000002.npy differs" in tampered.stdout


def test_verbs_that_read_hdf5_shards_refuse_the_plugin_cache_naming_it(plugin, tmp_path, cli):
    table = make_table(tmp_path / "world", count=2)
    ours = tmp_path / "npy"
    assert cli(build_args(table, ours, "--set", "output.sink=npy-folder")).returncode == 0
    verbs = (["stats"], ["preview"], ["query", "dataset_index < 1"],
             ["export", "--to", "pt-dicts", str(tmp_path / "out")])
    for verb in verbs:
        done = cli([verb[0], str(ours), *verb[1:]])
        assert done.returncode == 2, (verb, done.stdout, done.stderr)
        assert f"is a npy-folder cache, but {verb[0]} reads HDF5 caches only" in done.stderr, done.stderr
    with pytest.raises(Exception, match="is a npy-folder cache, which LatentCacheDataset"):
        LatentCacheDataset(ours)
    extend = cli(build_args(table, ours, "--set", "output.sink=npy-folder", "--extend"))
    assert extend.returncode == 2 and "--extend grows a cache in place" in extend.stderr
