"""An optional capability of a tokenizer: it runs each convolution by a recorded kernel plan (tokenizers/kernels/).

A build whose tokenizer has it decides every plan in one process before its ranks start (pipeline/kernel_plan_pass.py),
and every rank, resume and deep verify replays that book: the same input gives the same bytes on every rank. A
tokenizer without it (PyTorch's own calls) is simply not asked.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from ..config import TokenizerConfig

Shape = tuple[int, int, int, int]  # (batch, frames, height, width) of a tokenizer call


class KernelPlanning(ABC):
    """What a tokenizer that runs recorded kernel plans answers, beside the Tokenizer interface."""

    carried_plans_key: ClassVar[str] = ""  # its key naming a carried plan book (tokenizer.KEY), for messages
    without_plans: ClassVar[str] = ""  # its setting that runs it without recorded plans (KEY=VALUE), for messages

    @classmethod
    @abstractmethod
    def records_plans(cls, cfg: TokenizerConfig, device: str) -> bool:
        """Does it run each convolution by a recorded kernel plan on `device` with these settings?"""

    @classmethod
    def carried_plans_file(cls, cfg: TokenizerConfig) -> str | None:
        """A plan book the user carried from another machine, asked before the tokenizer's own books (None)."""
        return None

    @classmethod
    def plan_signatures(cls, cfg: TokenizerConfig, shapes: list[Shape]) -> set[str]:
        """The convolution signatures whose plans a build with `cfg` records for tokenizer calls of `shapes`,
        found without a GPU (what a shipped book must hold for a preset); none by default."""
        return set()

    @abstractmethod
    def record_plans(self, entries: dict[str, str], replay_only: bool = False,
                     beneath: dict[str, str] | None = None) -> None:
        """Look each convolution's kernel plan up first in the recorded `entries`, then in `beneath` (a carried
        book), then in the tokenizer's own books, recording what they choose (recorded_plans); with
        `replay_only`, a plan `entries` lacks is an error (plan_book.PlanMissing). Called before the first
        encode."""

    @abstractmethod
    def recorded_plans(self) -> dict[str, str]:
        """{signature: plan} of every convolution run since record_plans, and the entries it was given."""

    def shipped_plans(self) -> dict[str, str]:
        """{signature: plan} of the book latentforge ships for this tokenizer's environment ({} when none)."""
        return {}


def plans_kernels(backend: type, cfg: TokenizerConfig, device: str) -> bool:
    """Does a tokenizer class run recorded kernel plans on `device` with `cfg`?"""
    return issubclass(backend, KernelPlanning) and backend.records_plans(cfg, device)


def replay_plans(tokenizer: object, entries: dict[str, str], replay_only: bool = False) -> None:
    """Hand a tokenizer the plans a build recorded; nothing for one that runs no kernel plans."""
    if isinstance(tokenizer, KernelPlanning):
        tokenizer.record_plans(entries=entries, replay_only=replay_only)
