"""The plan pass (pipeline/kernel_plan_pass.py): a build decides the kernel plan of every call shape it can make in one
process before any rank starts; ranks replay that book and refuse a shape it lacks; the build records one book
in its records and in cache_config.json; the book travels to ranks and Ray nodes in their RankSpec.

The tokenizer is helpers/planned_tokenizer.PlannedHaar: it picks a plan per call shape through a PlanBook as the
Wan fast path does per convolution on CUDA, so these run on the CPU. The plan pass runs in this process (its
spawned process could not resolve a tokenizer registered by a test)."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace

import pytest

from helpers.exec_world import exec_config, make_table
from helpers.planned_tokenizer import NAME, register_planned_haar
from latentforge.builder.run import build
from latentforge.cache.config_file import CacheConfig
from latentforge.errors import InputNotice, LatentforgeError
from latentforge.executor import kernel_plan_decision as plan_decision
from latentforge.executor.rank import RankSpec
from latentforge.executor.ray import kernel_plan_task as plan_task
from latentforge.pipeline import kernel_plan_pass as plan_pass
from latentforge.pipeline.kernel_plan_pass import DecidedPlans, PassResult, PlanRequest, decide_plans, plan_shapes
from latentforge.pipeline.kernel_plans import environment_digest
from latentforge.pipeline.models import load_models
from latentforge.tokenizers.kernels.plan_book import PlanMissing

SHAPE = (9, 32, 48)  # exec_config's frames, height, width


def key(batch: int) -> str:
    return f"x[{batch}, 3, {SHAPE[0]}, {SHAPE[1]}, {SHAPE[2]}]"


@pytest.fixture
def planned(monkeypatch):
    """PlannedHaar registered; every plan pass run in this process, its requests and answers noted."""
    register_planned_haar(monkeypatch)
    passes = []

    def in_this_process(request, device):
        passes.append((request, device, decide_plans(request, device)))
        return passes[-1][2]

    monkeypatch.setattr(plan_decision, "spawned_plan_pass", in_this_process)
    return passes


def test_every_batch_size_up_to_the_batch_or_the_unit_is_planned(tmp_path):
    shapes = lambda *sets: plan_shapes(exec_config(tmp_path / "t.csv", tmp_path / "r", *sets))  # noqa: E731
    assert shapes("output.batch_size=3", "output.unit_size=8") == [(b, *SHAPE) for b in (1, 2, 3)]
    assert shapes("output.batch_size=4", "output.unit_size=2") == [(1, *SHAPE), (2, *SHAPE)]  # no batch outgrows a unit
    assert shapes("output.batch_size=1") == [(1, *SHAPE)]


def test_a_build_decides_every_plan_before_its_ranks_and_records_one_book(planned, tmp_path):
    table = make_table(tmp_path / "world", count=5)  # units of 2, 2 and 1: batches of 2 and of 1
    root = tmp_path / "cache"
    with pytest.warns(InputNotice) as notes:
        build(exec_config(table, root, f"tokenizer.name={NAME}", "output.batch_size=2", "run.procs=1"), quiet=True)
    (request, device, result), = planned
    digest, decided = result.digest, result.book
    assert device == "cpu" and request.known == {}  # a first run: nothing recorded yet
    assert sorted(decided) == [key(1), key(2)] and decided[key(1)] == "shipped plan"
    # said once: the batch-2 shape is in no shipped book, so this machine chose its plan; the batch-1 one is shipped
    (note,) = [str(n.message) for n in notes if "plan book shipped" in str(n.message)]
    assert note.startswith("1 convolution(s) of this build's shapes are in no plan book shipped") and key(2) in note
    assert key(1) not in note and f"--set tokenizer.plans_file={root}/cache_config.json" in note
    # the ranks replayed it (they may not choose) and the build recorded exactly that book, once
    book = root / "build" / "conv_plans" / f"{digest}.json"
    assert json.loads(book.read_text()) == decided
    assert CacheConfig.load(root).conv_plans == {digest: decided}


def test_a_rank_meeting_a_shape_the_plan_pass_missed_refuses_and_times_nothing(planned, tmp_path, monkeypatch):
    table = make_table(tmp_path / "world", count=3)  # units of 2 and 1
    monkeypatch.setattr(plan_pass, "plan_shapes", lambda config: [(2, *SHAPE)])  # a pass that forgets batch 1
    with pytest.raises(PlanMissing) as error:
        build(exec_config(table, tmp_path / "cache", f"tokenizer.name={NAME}", "output.batch_size=2",
                          "run.procs=1"), quiet=True)
    assert key(1) in str(error.value) and "plan pass" in str(error.value)
    (_, _, result), = planned
    digest, decided = result.digest, result.book
    book = tmp_path / "cache" / "build" / "conv_plans" / f"{digest}.json"
    assert json.loads(book.read_text()) == decided == {key(2): decided[key(2)]}  # the rank added nothing


def test_the_builds_own_book_wins_then_the_carried_one_then_timing(planned, tmp_path, monkeypatch):
    from helpers.planned_tokenizer import PlannedHaar

    carried = tmp_path / "carried.json"
    carried.write_text(json.dumps({key(1): "carried plan", key(2): "carried plan", key(3): "carried plan"}))
    monkeypatch.setattr(PlannedHaar, "carried_plans_file", classmethod(lambda cls, cfg: str(carried)))
    config = exec_config(tmp_path / "t.csv", tmp_path / "r", f"tokenizer.name={NAME}", "output.batch_size=4",
                         "output.unit_size=4")
    digest = environment_digest("cpu")
    result = decide_plans(PlanRequest(config, {digest: {key(2): "recorded by the build"}}), "cpu")
    decided = result.book
    assert result.digest == digest
    assert decided == {key(1): "carried plan", key(2): "recorded by the build", key(3): "carried plan",
                       key(4): decided[key(4)]}
    assert decided[key(4)].startswith("timed by pid")  # only what nobody knew is timed
    assert result.unshipped == (key(4),)  # what was carried or the build's own is no news


def test_the_decided_book_travels_in_the_rank_spec_and_is_replayed_only(tmp_path, monkeypatch):
    register_planned_haar(monkeypatch)
    config = exec_config(tmp_path / "t.csv", tmp_path / "r", f"tokenizer.name={NAME}")
    plans = DecidedPlans({environment_digest("cpu"): {key(1): "eng41"}})
    spec = RankSpec(0, "cpu", 0, None, config, str(tmp_path / "node-local" / "build"), 0, plans)
    arrived = pickle.loads(pickle.dumps(spec))  # as a spawned rank or a Ray actor receives it
    assert arrived.plans == plans
    tokenizer, _ = load_models(arrived.config, arrived.device, arrived.plans)
    assert tokenizer.recorded_plans() == {key(1): "eng41"}
    import torch

    with pytest.raises(PlanMissing):
        tokenizer.encode(torch.zeros((2, 3, *SHAPE)))
    with pytest.raises(LatentforgeError, match="0123456789abcdef.*set tokenizer.kernels=heuristics"):
        DecidedPlans({"0123456789abcdef": {}}, "kernels=heuristics").for_device("cpu")  # another environment


class _FakeRay:
    """ray.remote, ray.get and ray.exceptions as ray_plan_pass uses them; the task runs when got."""

    class exceptions:
        class RayTaskError(Exception):
            cause = None

    def __init__(self):
        self.options = None

    def remote(self, **options):
        self.options = options
        return lambda function: type("Task", (), {"remote": staticmethod(lambda *args: (function, args))})

    def get(self, ref):
        function, args = ref
        return function(*args)


def test_the_ray_driver_runs_one_plan_task_on_a_gpu_and_records_its_book(tmp_path, monkeypatch):
    decided = {key(1): "eng41", key(2): "pytorch"}
    calls = []
    monkeypatch.setattr(plan_task, "decide_plans_here",
                        lambda request, device: calls.append(device) or PassResult("ab12", decided))
    ray = _FakeRay()
    request = PlanRequest(exec_config(tmp_path / "t.csv", tmp_path / "r"), {})
    plans = plan_task.ray_plan_pass(ray, request, tmp_path / "build", "token", "cuda:0")
    assert calls == ["cuda:0"] and ray.options["num_gpus"] == 1 and ray.options["max_calls"] == 1
    assert plans == DecidedPlans({"ab12": decided})
    assert json.loads((tmp_path / "build" / "conv_plans" / "ab12.json").read_text()) == decided

    def fails(request, device):
        error = _FakeRay.exceptions.RayTaskError("wrapped")
        error.cause = RuntimeError("cuDNN offers no such plan")
        raise error

    monkeypatch.setattr(plan_task, "decide_plans_here", fails)
    with pytest.raises(LatentforgeError, match="plan pass failed on the Ray cluster: cuDNN offers no such plan"):
        plan_task.ray_plan_pass(ray, request, tmp_path / "build", "token", "cuda:0")


@pytest.mark.slow  # two fresh interpreters importing torch
def test_the_local_plan_pass_runs_in_a_spawned_process_and_reports_its_failure(tmp_path):
    config = exec_config(tmp_path / "t.csv", tmp_path / "r", "output.batch_size=2")  # haar: no plans to decide
    assert plan_decision.spawned_plan_pass(PlanRequest(config, {}), "cpu") == PassResult(environment_digest("cpu"), {})
    with pytest.raises(LatentforgeError, match="plan pass on cpu failed: unknown tokenizer 'no-such'"):
        plan_decision.spawned_plan_pass(PlanRequest(replace(config, tokenizer=replace(config.tokenizer,
                                                                                         name="no-such")), {}), "cpu")
