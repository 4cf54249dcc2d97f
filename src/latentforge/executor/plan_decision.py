"""Where a build's plan pass runs (pipeline/plan_pass.py) for the local executor: one spawned process per distinct
environment among the build's devices, on the first device of it, which frees that GPU when it exits; the book
it decides is written to the build's records and handed to every rank in its RankSpec."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..errors import LatentforgeError
from ..io import canonical_json
from ..pipeline.kernel_plans import write_build_book
from ..pipeline.plan_pass import DecidedPlans, PlanRequest, decide_plans


def decide_plans_here(request: PlanRequest, device: str) -> tuple[str, dict[str, str]]:
    """decide_plans, its error as a plain LatentforgeError: the project's errors with extra arguments do not
    pickle back from another process."""
    try:
        return decide_plans(request, device)
    except LatentforgeError as error:
        raise LatentforgeError(str(error)) from None


def spawned_plan_pass(request: PlanRequest, device: str) -> tuple[str, dict[str, str]]:
    """The plan pass in a fresh process on `device` (its memory on the GPU is freed when it exits)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(decide_plans_here, request, device).result()


def decide_local_plans(request: PlanRequest, devices: list[str], environments: list[dict[str, str]],
                       build_dir: Path) -> DecidedPlans:
    """The build's plans for each distinct environment of `devices` (`environments` lists theirs), recorded in
    `build_dir` before any rank starts."""
    first_of: dict[str, str] = {}
    for device, environment in zip(devices, environments):
        first_of.setdefault(canonical_json(environment), device)
    books = {}
    for device in first_of.values():
        digest, entries = spawned_plan_pass(request, device)
        write_build_book(build_dir, digest, entries)
        books[digest] = entries
    return DecidedPlans(books)
