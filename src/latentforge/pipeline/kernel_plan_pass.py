"""The plan pass: before any rank encodes, one process decides the kernel plan of every convolution the build's
shapes need, and every rank and node then replays exactly that book (tokenizers/kernels/plan_book.py, replay_only).

A convolution's signature depends only on the shapes the tokenizer sees, never on pixel values: the batch size
(a unit's last batch, or one thinned by rejects, can be any size from 1 to output.batch_size, and no batch holds
more than a unit), the clip's frames, height and width (one shape per build; a bucketed build is one build per
bucket), and the causal windows the fast path cuts the clip into (chosen from the batch, the frame size and
its memory limit). Modalities do not add shapes: each one goes through the tokenizer on its own, with
the same [B, 3, T, H, W] (pipeline/batch_queue.py). So the pass loads the tokenizer as a rank does and encodes
zeros of every batch size; each signature it meets is looked up in the build's own book (a resumed build), then
the carried book (KernelPlanning.carried_plans_file), then the machine's shared and the shipped books, and timed here,
once, only where none of them knows it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import registry
from ..config import BuildConfig
from ..errors import InputNotice, LatentforgeError
from ..tokenizers.kernel_planning import KernelPlanning, plans_kernels
from ..tokenizers.kernels.carried_books import carried_book
from .kernel_plans import environment_digest, recorded_books


@dataclass(frozen=True)
class PlanRequest:
    """What a plan pass needs, sent to the process that runs it (pickled: a spawned process, a Ray task)."""

    config: BuildConfig
    known: dict[str, dict[str, str]]  # the build's own books so far, by environment digest


@dataclass(frozen=True)
class DecidedPlans:
    """The books a plan pass decided, by environment digest: what every rank and node of the build replays,
    handed to them with their task (RankSpec), never read from a folder of their own."""

    books: dict[str, dict[str, str]]
    without_plans: str = ""  # the tokenizer setting that runs it without recorded plans (KernelPlanning)

    def for_device(self, device: str | torch.device) -> dict[str, str]:
        """The book a process encoding on `device` replays; an error when the pass ran in another environment."""
        digest = environment_digest(device)
        if digest not in self.books:
            raise LatentforgeError(
                f"this process's environment (digest {digest}, {torch.device(device)}) is not the one the build's "
                f"plan pass decided kernel plans in ({', '.join(sorted(self.books))}): every GPU of a build with "
                "recorded plans must be the same model with the same driver and software; run the build on such "
                "GPUs" + (f", or set tokenizer.{self.without_plans}" if self.without_plans else ""))
        return self.books[digest]


@dataclass(frozen=True)
class PassResult:
    """What one plan pass decided: its environment, its book, and the signatures of that book no book shipped with
    latentforge for the environment (nor a carried book, nor the build's own) holds: chosen on this machine."""

    digest: str
    book: dict[str, str]
    unshipped: tuple[str, ...] = ()


_SHOWN = 3


def _planning(config: BuildConfig, attribute: str) -> str:
    """A KernelPlanning message attribute of the build's tokenizer ("" for one without the capability)."""
    backend = registry.resolve("tokenizer", config.tokenizer.name)
    return getattr(backend, attribute) if issubclass(backend, KernelPlanning) else ""


def decided_plans(request: PlanRequest, books: dict[str, dict[str, str]]) -> DecidedPlans:
    """The books a build's ranks replay, with the setting their refusal names."""
    return DecidedPlans(books, _planning(request.config, "without_plans"))


def note_unshipped(result: PassResult, request: PlanRequest, build_dir: Path) -> None:
    """Say once, before any rank encodes, which signatures this machine chose, and how to get the same bytes
    elsewhere."""
    if not result.unshipped:
        return
    key = _planning(request.config, "carried_plans_key")
    carry = f"--set tokenizer.{key}=" if key else ""
    shown = "; ".join(result.unshipped[:_SHOWN]) + (f"; and {len(result.unshipped) - _SHOWN} more"
                                                    if len(result.unshipped) > _SHOWN else "")
    warnings.warn(f"{len(result.unshipped)} convolution(s) of this build's shapes are in no plan book shipped for this "
                  f"GPU and software, so their kernels were chosen on this machine (timed here, or read from its "
                  f"shared plan folder): {shown}. Another machine may choose others and write other bytes; to build "
                  f"the same bytes there, carry this build's book: {carry}"
                  f"{Path(build_dir).parent}/cache_config.json (or its build/conv_plans/ book)",
                  InputNotice, stacklevel=2)


def needs_plan_pass(config: BuildConfig, device: str) -> bool:
    """Does a build encoding on `device` run recorded kernel plans (so its plans are decided before its ranks)?"""
    return plans_kernels(registry.resolve("tokenizer", config.tokenizer.name), config.tokenizer, device)


def plan_request(config: BuildConfig, build_dir: Path, device: str) -> PlanRequest | None:
    """The plan pass a build encoding on `device` runs before its ranks (None when it runs no recorded plans)."""
    return PlanRequest(config, recorded_books(build_dir)) if needs_plan_pass(config, device) else None


def plan_shapes(config: BuildConfig) -> list[tuple[int, int, int, int]]:
    """(batch, frames, height, width) of every tokenizer call the build can make."""
    frames = config.frames
    largest = min(config.output.batch_size, config.output.unit_size)
    return [(batch, frames.num_frames, frames.height, frames.width) for batch in range(1, largest + 1)]


def decide_plans(request: PlanRequest, device: str) -> PassResult:
    """Run the plan pass in this process on `device`: the environment digest, the book of every signature the
    build's shapes need (plus what the build's own book held before), and which of them no shipped book holds."""
    config = request.config
    backend = registry.resolve("tokenizer", config.tokenizer.name)
    tokenizer = backend.from_config(config.tokenizer, torch.device(device))
    digest = environment_digest(device)  # after the tokenizer is made: it may set what the record reads
    if not isinstance(tokenizer, KernelPlanning):  # it runs no recorded kernel plans: nothing to decide
        return PassResult(digest, {})
    carried_file = backend.carried_plans_file(config.tokenizer)
    carried = carried_book(carried_file, digest) if carried_file else None
    known = request.known.get(digest, {})
    tokenizer.record_plans(entries=known, beneath=carried)
    with torch.inference_mode():
        for batch, frames, height, width in plan_shapes(config):
            tokenizer.encode(torch.zeros((batch, 3, frames, height, width), device=device))
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    book, shipped = tokenizer.recorded_plans(), tokenizer.shipped_plans()
    unshipped = tuple(s for s in book if s not in shipped and s not in (carried or {}) and s not in known)
    return PassResult(digest, book, unshipped)
