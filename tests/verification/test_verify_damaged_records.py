"""Deep verify re-encodes from the build records when they are intact; a damaged plan.jsonl is made again from the
dataset listing, and a damaged run.json is replaced by what cache_config.json records, asking only for the dataset's
location it alone held."""

from __future__ import annotations

import pytest

from latentforge.errors import ConfigError
from latentforge.verification.deep import verify_deep
from latentforge.verification.reencode import Overrides


def test_a_damaged_plan_is_made_again_from_the_listing(cache):
    plan = cache / "build" / "plan.jsonl"
    plan.write_bytes(plan.read_bytes()[:40])
    report = verify_deep(cache, spot=3)
    assert report.ok, report.failures


def test_a_damaged_run_record_asks_for_the_dataset_and_then_verifies(cache, tiny_inputs):
    (cache / "build" / "run.json").write_text('{"key": {"config": ')
    with pytest.raises(ConfigError, match=r"has a damaged build/run.json, so the dataset location is unknown; pass it "
                                          "with --dataset"):
        verify_deep(cache, spot=1)
    report = verify_deep(cache, spot=1, overrides=Overrides(dataset=(str(tiny_inputs[0]),)))
    assert report.ok, report.failures
