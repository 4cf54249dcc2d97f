"""A bucketed build run by the CLI in a subprocess, SIGKILLed (the project's fault injection) while the second
bucket writes its staged unit; rerunning the same command ends in the SHA256SUMS of the uninterrupted in-process
build of the same config (the session fixture). Kills between buckets: tests/builder/test_buckets.py."""

from __future__ import annotations

import signal

import pytest
import yaml

from helpers.bucket_world import bucket_settings
from helpers.exec_world import run_cli, sums

pytestmark = pytest.mark.slow  # a killed CLI run in a subprocess, then the resume

FIRST, SECOND = "buckets/17x32x64", "buckets/17x64x32"


def test_kill_in_the_second_bucket_then_the_same_command_gives_the_same_sums(bucket_inputs, bucketed_cache, tmp_path,
                                                                              cli):
    root = tmp_path / "cache"
    config = tmp_path / "buckets.yaml"
    config.write_text(yaml.safe_dump(bucket_settings(*bucket_inputs, root)))
    args = ["build", "--config", str(config), "--quiet"]

    # unit_size 2: each of the first two buckets stages one unit, so the 2nd arrival is inside the second's write
    done = run_cli(args, LATENTFORGE_FAULT="stage:2")
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (root / FIRST / "_CACHE_COMPLETE").is_file()
    staging = root / SECOND / "build" / "staging"
    assert any(p.name.startswith(".unit-") for p in staging.iterdir()), "the kill was not inside a staged write"
    assert not (root / SECOND / "_CACHE_COMPLETE").exists() and not (root / "_CACHE_COMPLETE").exists()

    done = cli(args)  # only the killed run needs its own process
    assert done.returncode == 0, done.stderr
    assert sums(root) == sums(bucketed_cache)
    assert (root / "_CACHE_COMPLETE").is_file()
