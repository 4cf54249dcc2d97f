"""The Ray executor on a local CPU cluster: same SHA256SUMS as the local executor (tests/conftest.py's `ray_world`),
the probe runs in Ray tasks and the driver records the results a local probe gives, a killed worker's unit is
rescheduled, and a unit that keeps failing stops the build with its error after run.max_unit_tries."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
from pathlib import Path

import pytest

from helpers.exec_world import sums
from helpers.ray_nodes import local_ray
from latentforge.builder.run import build
from latentforge.cache.layout import PROBE_RECORD
from latentforge.cli.build import config_from_args
from latentforge.cli.main import make_parser
from latentforge.config.loading import load_config
from latentforge.errors import ConfigError, LatentforgeError
from latentforge.executor.base import Executor
from latentforge.executor.events import UnitStaged
from latentforge.executor.ray.dispatch import QueuedUnit, UnitDispatcher
from latentforge.pipeline import probe
from latentforge.pipeline.plan import make_plan, plan_samples
from latentforge.pipeline.unit_inputs import cut_units
from latentforge.records import SourceEntry
from latentforge.staging.staged_units import completed_units

CLIPS = 8  # ray_world's clips; unit_size 2 -> 4 units


def _config(table: Path, root: Path, *sets: str):
    return load_config(None, [
        "dataset.reader=table", f"dataset.path={table}", "dataset.id_column=id", f"output.root={root}",
        "tokenizer.name=haar-4x8x8", "text.name=none", "frames.num_frames=9", "frames.height=32",
        "frames.width=48", "output.rows_per_shard=4", "output.unit_size=2", "output.min_free_bytes=0", *sets])


def _ray_stats(root: Path) -> dict:
    [path] = sorted((root / "build").glob("stats-*.json"))[-1:]
    return json.loads(path.read_text())


@pytest.fixture
def table(ray_world) -> Path:
    return ray_world[0]


@pytest.fixture
def local_sums(ray_world) -> str:
    return ray_world[1]


@pytest.fixture(scope="module")
def cluster():
    with local_ray():
        yield


@pytest.mark.slow
def test_ray_build_equals_local_build(table, local_sums, cluster, tmp_path):
    root = tmp_path / "cache"
    build(_config(table, root, "run.executor=ray", "run.procs=2", "run.workers_per_gpu=0"), quiet=True)
    assert sums(root) == local_sums
    check = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=root, capture_output=True)
    assert check.returncode == 0, check.stdout
    stats = _ray_stats(root)
    assert stats["outcome"] == "complete" and stats["settings"]["executor"] == "ray"
    ranks = stats["ranks"]
    assert len({r["pid"] for r in ranks}) == 2 and os.getpid() not in {r["pid"] for r in ranks}
    assert sum(r["samples"] for r in ranks) == CLIPS  # which worker ran what is up to the race for units


@pytest.mark.slow
def test_the_probe_runs_in_ray_tasks_and_the_driver_records_what_a_local_probe_gives(table, local_sums, cluster,
                                                                                     tmp_path, monkeypatch):
    # Ray's worker processes import latentforge afresh: the probe fails where it runs in this process, the driver,
    # and the local executor's placement (whose spawned processes would import it afresh too) fails at once
    def in_the_driver(sample, config):
        raise AssertionError(f"{sample.sample_id} was probed in the driver")

    def placed_locally(self, samples, advance):
        raise AssertionError("the probe was placed in processes of the driver's machine")

    root = tmp_path / "cache"
    config = _config(table, root, "run.executor=ray", "run.procs=1", "run.workers_per_gpu=0", "run.probe_workers=2")
    with monkeypatch.context() as patched:
        patched.setattr(probe, "probe_sample", in_the_driver)
        patched.setattr(Executor, "run_probe", placed_locally)
        build(config, quiet=True)
    assert sums(root) == local_sums
    samples, _ = plan_samples(config)
    local = probe.probe_all(samples, config)
    recorded = pickle.loads((root / "build" / PROBE_RECORD).read_bytes())["results"]
    assert {sample_id: result for sample_id, (_, result) in recorded.items()} == \
        {s.sample_id: local[s.source_index] for s in samples}


@pytest.mark.slow
def test_killed_worker_is_replaced_and_output_is_identical(table, local_sums, cluster, tmp_path, monkeypatch):
    # The only worker (rank 0) SIGKILLs itself at its 2nd encode: the 2nd sample of its first unit, mid-unit.
    monkeypatch.setenv("LATENTFORGE_RAY_FAULT", "0:encode:2")
    root = tmp_path / "cache"
    build(_config(table, root, "run.executor=ray", "run.procs=1", "run.workers_per_gpu=1"), quiet=True)
    assert sums(root) == local_sums
    ranks = {r["rank"]: r for r in _ray_stats(root)["ranks"]}
    assert list(ranks) == [1]  # rank 0 died before staging; its replacement did every unit
    assert ranks[1]["samples"] == CLIPS and ranks[1]["units"] == CLIPS // 2


@pytest.mark.slow
def test_unit_that_keeps_failing_is_reported_after_max_tries(table, local_sums, cluster, tmp_path):
    root = tmp_path / "cache"
    blocker = root / "build" / "staging" / "unit-000001.h5"
    blocker.mkdir(parents=True)  # staging unit 1 fails the same way on any worker
    (root / "build" / "lock").touch()  # as a build that made these folders leaves it: the root is latentforge's
    config = _config(table, root, "run.executor=ray", "run.procs=2", "run.workers_per_gpu=0",
                     "run.max_unit_tries=2")
    with pytest.raises(LatentforgeError, match=r"unit 1 \(samples clip002 \.\. clip003\) failed 2 time") as info:
        build(config, quiet=True)
    assert "IsADirectoryError" in str(info.value)
    assert _ray_stats(root)["outcome"] == "failed"
    assert 1 not in completed_units(root / "build")
    blocker.rmdir()
    build(config, quiet=True)  # the rerun resumes and ends in the same cache
    assert sums(root) == local_sums


def test_dispatcher_requeues_and_charges_the_running_unit(tmp_path):
    entries = [SourceEntry(key=f"s{i}", video=str(tmp_path / f"s{i}.mp4"), video_rel=f"s{i}.mp4", caption="c")
               for i in range(6)]
    samples, _ = make_plan(entries, None, None)
    units = cut_units(samples, {s.source_index: object() for s in samples}, 2)
    dispatcher = UnitDispatcher([QueuedUnit.of(u) for u in units])
    assert [dispatcher.take(7).index, dispatcher.take(7).index, dispatcher.take(8).index] == [0, 1, 2]
    dispatcher.staged(UnitStaged(8, 2, 2, {}, "n"))
    charge = dispatcher.release(7)
    assert (charge.unit, charge.tries, charge.first_sample, charge.last_sample) == (0, 1, "s0", "s1")
    again = [dispatcher.take(9), dispatcher.take(9), dispatcher.take(9)]
    assert again[0].unit().samples == units[0].samples and again[1].index == 1 and again[2] is None
    assert dispatcher.release(9).tries == 2 and dispatcher.release(8) is None
    assert dispatcher.drain()[1] == 2  # units 0 and 1 are back in the queue, unit 2 is staged


def test_cli_flags_and_config_checks(tmp_path):
    args = make_parser().parse_args(["build", "--dataset", "x.csv", "--reader", "table", "--out", str(tmp_path),
                                      "--executor", "ray", "--ray-address", "10.0.0.1:6379"])
    config = config_from_args(args)
    options = config.run.options
    assert (config.run.executor, options.ray_address, options.max_unit_tries) == ("ray", "10.0.0.1:6379", 3)
    base = ["dataset.reader=table", "dataset.path=x.csv", f"output.root={tmp_path}"]
    for bad in ("run.executor=dask", "run.max_unit_tries=0"):
        with pytest.raises(ConfigError, match=bad.split("=")[0]):
            load_config(None, [*base, bad])
    with pytest.raises(ConfigError, match="with run.executor=ray"):
        load_config(None, [*base, "run.executor=ray", "run.gpus=0,1"])
