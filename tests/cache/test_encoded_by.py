"""cache_config.json's `encoded_by`: which function in which environment made which units. One function per
cache (commit refuses another); several environments pass verify with a warning, and deep verify then compares
within the tolerance instead of bit for bit."""

from __future__ import annotations

import dataclasses
import json

import pytest

from helpers.fake_rows import (
    PLAN_REJECTS,
    empty_prompt_arrays,
    make_cache_config,
    make_samples,
    planned_units,
    stage_units,
)
from latentforge.cache.config_file import CacheConfig
from latentforge.cache.encoded_by import function_digest
from latentforge.errors import CacheIntegrityError
from latentforge.pipeline.environment import environment_record
from latentforge.pipeline.kernel_plans import environment_digest, recorded_books, recorded_plans, write_build_book
from latentforge.sinks.hdf5.commit import commit_cache
from latentforge.sinks.hdf5.integrity import verify_integrity
from latentforge.verification.tolerances import choose_comparison

H200 = {"device_type": "cuda", "device_name": "NVIDIA H200", "cuda": "13.0", "cuda_driver": "13.0", "cudnn": "91200",
        "cudnn_heuristics": "A", "torch": "2.11.0+cu130", "latentforge": "0.1.0"}
A100 = {**H200, "device_name": "NVIDIA A100-SXM4-80GB"}


def _commit(root, encoded_by):
    config = make_cache_config()
    units = stage_units(root / "build", make_samples(), unit_size=6, encoded_by=encoded_by)
    return commit_cache(root, units, PLAN_REJECTS, config, empty_prompt_arrays(), {}, planned_units(6))


def test_units_of_one_function_in_two_environments_verify_with_a_warning(tmp_path):
    function = function_digest(make_cache_config().tokenizer)
    result = _commit(tmp_path, lambda unit: {"function": function, "environment": H200 if unit < 2 else A100})
    written = json.loads((tmp_path / "cache_config.json").read_text())["encoded_by"]
    assert written == [{"units": [[0, 1]], "function": function, "environment": H200},
                       {"units": [[2, 3]], "function": function, "environment": A100}]
    report = verify_integrity(tmp_path)
    assert report.ok and result.report.ok
    assert [w.name for w in report.warnings] == ["encoded_by"] and "2 environments" in report.warnings[0].detail
    assert "NVIDIA A100" in report.warnings[0].detail


def test_a_unit_of_another_function_fails_the_commit(tmp_path):
    function = function_digest(make_cache_config().tokenizer)
    other = function_digest({**make_cache_config().tokenizer, "precision": "bf16"})
    with pytest.raises(CacheIntegrityError, match="encoded by another function"):
        _commit(tmp_path, lambda unit: {"function": other if unit == 3 else function, "environment": H200})
    assert not (tmp_path / "_CACHE_COMPLETE").exists()


def test_the_comparison_is_exact_only_for_one_environment_equal_to_this_one():
    here = environment_record("cpu")
    assert choose_comparison([here], "cpu", 0.01, [], []).exact
    assert not choose_comparison([here, H200], "cpu", 0.01, [], []).exact
    elsewhere = choose_comparison([H200], "cpu", 0.01, [], [])
    assert not elsewhere.exact and "device_type 'cuda' -> 'cpu'" in elsewhere.why
    autotuned = choose_comparison([here], "cpu", 0.01, ["cudnn_benchmark"], [])
    assert not autotuned.exact and "autotune" in autotuned.why and "tokenizer.cudnn_benchmark" in autotuned.why
    assert "does not record" in choose_comparison([], "cpu", 0.01, [], []).why


def test_the_kernel_plans_a_build_recorded_travel_in_cache_config(tmp_path):
    """Each environment's book under build/conv_plans goes into cache_config.json, where deep verify finds the
    book of its own environment; a build that recorded none (the CPU) writes no `conv_plans` key at all."""
    build_dir = tmp_path / "build"
    write_build_book(build_dir, environment_digest("cpu"), {"conv b": "eng41_k2=0", "conv a": "pytorch"})
    here = build_dir / "conv_plans" / f"{environment_digest('cpu')}.json"
    (here.parent / "0123456789abcdef.json").write_text(json.dumps({"conv a": "eng62_k2=4"}))
    (here.parent / "fedcba9876543210.json").write_text("{}")  # an environment that recorded nothing
    books = recorded_books(build_dir)
    assert books == {here.stem: {"conv a": "pytorch", "conv b": "eng41_k2=0"},
                     "0123456789abcdef": {"conv a": "eng62_k2=4"}}
    function = function_digest(make_cache_config().tokenizer)
    config = dataclasses.replace(make_cache_config(), conv_plans=books)
    units = stage_units(tmp_path / "staged", make_samples(), unit_size=6,
                        encoded_by=lambda unit: {"function": function, "environment": H200})
    commit_cache(tmp_path / "cache", units, PLAN_REJECTS, config, empty_prompt_arrays(), {}, planned_units(6))
    loaded = CacheConfig.load(tmp_path / "cache")
    assert loaded.conv_plans == books and verify_integrity(tmp_path / "cache").ok
    assert recorded_plans(loaded.conv_plans, "cpu") == {"conv a": "pytorch", "conv b": "eng41_k2=0"}
    _commit(tmp_path / "plain", lambda unit: {"function": function, "environment": H200})
    assert "conv_plans" not in json.loads((tmp_path / "plain" / "cache_config.json").read_text())
