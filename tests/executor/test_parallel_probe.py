"""The probe spread over processes (executor/parallel_probe.py) gives what the probe in the main process gives, for
every sample and reject and in the same order, and how many processes run follows run.probe_workers."""

from __future__ import annotations

import pytest

from helpers.exec_world import exec_config, make_table
from latentforge.builder.probe_record import probe_remembered
from latentforge.builder.resume import resume_key
from latentforge.errors import ConfigError
from latentforge.executor.parallel_probe import PARALLEL_FROM, probe_in_main, probe_plan, probe_workers
from latentforge.pipeline.plan import plan_samples
from latentforge.pipeline.probe import probe_all


@pytest.mark.slow  # two spawned processes importing the package
def test_two_processes_probe_what_one_probes(tmp_path):
    table = make_table(tmp_path / "data", count=4, frames=13,
                       rows=[{"id": "short", "video": "videos/missing.mp4", "caption": "gone"}])
    config = exec_config(table, tmp_path / "cache", "frames.windows=every 4", "run.probe_workers=2")
    samples, _ = plan_samples(config)
    assert len(samples) > 4  # several windows of one video
    advanced = []
    parallel = probe_plan(samples, config, advanced.append)
    serial = probe_all(samples, config)
    assert list(parallel.items()) == list(serial.items()) and sum(advanced) == len(samples)  # the same order too
    assert sum(1 for result in parallel.values() if hasattr(result, "reason")) == 1  # the missing video's reject


def test_the_number_of_probe_processes(tmp_path):
    config = lambda setting: exec_config(tmp_path / "t.csv", tmp_path / "r", f"run.probe_workers={setting}")  # noqa: E731
    assert probe_workers(config("auto"), PARALLEL_FROM - 1) == 1  # few videos: the main process
    assert probe_workers(config("3"), 2) == 2 and probe_workers(config("1"), 500) == 1
    # where the Ray executor probes in the driver rather than in tasks on its cluster
    assert probe_in_main(config("auto"), PARALLEL_FROM - 1) and not probe_in_main(config("auto"), PARALLEL_FROM)
    assert probe_in_main(config("1"), 500) and probe_in_main(config("3"), 1) and not probe_in_main(config("2"), 2)
    with pytest.raises(ConfigError, match="run.probe_workers='0'; allowed: auto, or a whole number >= 1"):
        config("0")


def test_remembered_and_new_probes_come_in_the_plan_order(tmp_path):
    table = make_table(tmp_path / "data", count=4)
    config = exec_config(table, tmp_path / "cache")
    samples, _ = plan_samples(config)
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    probe = lambda todo, advance: probe_plan(todo, config, advance)  # noqa: E731
    probe_remembered(samples[2:], build_dir, resume_key(config), probe)  # the last samples recorded first
    remembered = probe_remembered(samples, build_dir, resume_key(config), probe)
    assert list(remembered.items()) == list(probe_all(samples, config).items())
