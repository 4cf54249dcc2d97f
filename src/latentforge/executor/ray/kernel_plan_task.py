"""The build's plan pass (pipeline/kernel_plan_pass.py) on a Ray cluster: one task on one GPU of the cluster, before any
worker starts. The driver writes the book it returns into its own records and hands it to every worker with its
RankSpec, so nodes that keep the build's records in separate node-local folders still replay one book, and the
driver's commit records that book in cache_config.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import LatentforgeError
from ...pipeline.kernel_plan_pass import (
    DecidedPlans,
    PassResult,
    PlanRequest,
    decide_plans,
    decided_plans,
    note_unshipped,
)
from ...pipeline.kernel_plans import write_build_book
from .session import BUILD_TOKEN_ENV


def decide_plans_here(request: PlanRequest, device: str) -> PassResult:
    """decide_plans, its error as a plain LatentforgeError: the project's errors with extra arguments do not
    pickle back from a Ray worker."""
    try:
        return decide_plans(request, device)
    except LatentforgeError as error:
        raise LatentforgeError(str(error)) from None


def ray_plan_pass(ray: Any, request: PlanRequest, build_dir: Path, token: str, device: str) -> DecidedPlans:
    """Decide the build's plans in a Ray task on one GPU, `device` as the task sees it (its worker process exits
    after it, freeing the GPU)."""
    task = ray.remote(num_gpus=1, num_cpus=1, max_calls=1, max_retries=0,
                      runtime_env={"env_vars": {BUILD_TOKEN_ENV: token}})(decide_plans_here)
    try:
        result = ray.get(task.remote(request, device))
    except ray.exceptions.RayTaskError as error:
        cause = getattr(error, "cause", None) or error
        raise LatentforgeError(f"the build's plan pass failed on the Ray cluster: {cause}") from None
    write_build_book(build_dir, result.digest, result.book)
    note_unshipped(result, request, build_dir)
    return decided_plans(request, {result.digest: result.book})
