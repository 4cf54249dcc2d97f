"""A CPU tokenizer that picks a "kernel plan" per call shape through a PlanBook, as the Wan fast path does per
convolution on CUDA: the build's plan-pass logic (pipeline/kernel_plan_pass.py) runs on the CPU with it. Its signature
is the shape the pipeline hands the tokenizer, so a build that passes with it met no shape the plan pass missed.
An unrecorded signature is "timed" by naming the process that chose it, so a plan chosen outside the plan pass
would show."""

from __future__ import annotations

import os

import torch

from latentforge import registry
from latentforge.tokenizers.haar import HaarTokenizer
from latentforge.tokenizers.kernel_planning import KernelPlanning
from latentforge.tokenizers.kernels.plan_book import PlanBook

NAME = "planned-haar"
SHIPPED = {"x[1, 3, 9, 32, 48]": "shipped plan"}  # the book it "ships" for its environment


def signature(video: torch.Tensor) -> str:
    return f"x{list(video.shape)}"


class PlannedHaar(KernelPlanning, HaarTokenizer):
    name = NAME
    carried_plans_key = "plans_file"  # what its messages name; the tests monkeypatch carried_plans_file

    def __init__(self, device: torch.device | str = "cpu"):
        super().__init__(device)
        self.book = PlanBook()

    @classmethod
    def records_plans(cls, cfg, device: str) -> bool:
        return True

    def record_plans(self, entries, replay_only=False, beneath=None) -> None:
        parent = None if replay_only else PlanBook(entries=beneath or {}, parent=PlanBook(entries=SHIPPED))
        self.book = PlanBook(entries=entries, parent=parent, replay_only=replay_only)

    def recorded_plans(self) -> dict[str, str]:
        return self.book.entries()

    def shipped_plans(self) -> dict[str, str]:
        return dict(SHIPPED)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        self.book.choose(signature(video), lambda: f"timed by pid {os.getpid()}")
        return super().encode(video)


def register_planned_haar(monkeypatch) -> None:
    """PlannedHaar as tokenizer `planned-haar` for this test (the plug-in table restored afterwards)."""
    monkeypatch.setattr(registry, "_PLUGINS", {kind: dict(table) for kind, table in registry._PLUGINS.items()})
    registry.register("tokenizer", NAME, PlannedHaar)
