"""Where a build's kernel plan pass runs (pipeline/kernel_plan_pass.py) for the local executor: one process per distinct
environment among the build's devices, on the first device of it, which frees that GPU when it exits; the book
it decides is written to the build's records and handed to every rank in its RankSpec."""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from pathlib import Path

from ..errors import LatentforgeError
from ..io import canonical_json
from ..pipeline.kernel_plan_pass import (
    DecidedPlans,
    PassResult,
    PlanRequest,
    decide_plans,
    decided_plans,
    note_unshipped,
)
from ..pipeline.kernel_plans import write_build_book
from .process_setup import child_process_setup, child_signals_held


def _plan_pass_main(request: PlanRequest, device: str, answer: Connection) -> None:
    """Entry point of the spawned plan pass: ("ok", PassResult) or ("error", why) back through `answer`."""
    child_process_setup()
    try:
        answer.send(("ok", decide_plans(request, device)))
    except BaseException as error:  # noqa: BLE001 - every failure goes to the main process as text
        why = str(error) if isinstance(error, LatentforgeError) else f"{type(error).__name__}: {error}"
        answer.send(("error", why))


def spawned_plan_pass(request: PlanRequest, device: str) -> PassResult:
    """The plan pass in a fresh process on `device`, which frees its GPU memory when it exits; killed when the
    build stops meanwhile (it dies with this process too)."""
    context = multiprocessing.get_context("spawn")
    mine, theirs = context.Pipe(duplex=False)
    process = context.Process(target=_plan_pass_main, args=(request, device, theirs), name="plan-pass")
    with child_signals_held():
        process.start()
    theirs.close()  # so recv() ends when the child dies without answering
    try:
        outcome, value = mine.recv()
    except EOFError:
        process.join()
        raise LatentforgeError(f"the build's plan pass on {device} died (exit code {process.exitcode}) before "
                               "deciding its kernel plans") from None
    except BaseException:  # the build stops (StopRequested): so does its plan pass
        process.kill()
        process.join()
        raise
    process.join()
    if outcome == "error":
        raise LatentforgeError(f"the build's plan pass on {device} failed: {value}")
    return value


def decide_local_plans(request: PlanRequest, devices: list[str], environments: list[dict[str, str]],
                       build_dir: Path) -> DecidedPlans:
    """The build's plans for each distinct environment of `devices` (`environments` lists theirs), recorded in
    `build_dir` before any rank starts."""
    first_of: dict[str, str] = {}
    for device, environment in zip(devices, environments):
        first_of.setdefault(canonical_json(environment), device)
    books = {}
    for device in first_of.values():
        result = spawned_plan_pass(request, device)
        write_build_book(build_dir, result.digest, result.book)
        note_unshipped(result, request, build_dir)
        books[result.digest] = result.book
    return decided_plans(request, books)
