"""The fast encoder's convolutions, run either by PyTorch or by a kernel plan picked by name.

`TorchConvs` calls F.conv2d/F.conv3d: cuDNN's heuristics pick the kernel (a function of the shapes, the GPU model
and the software). `PlannedConvs` runs, for each convolution signature (conv_kernel.signature), the plan its
PlanBook records. A signature the book has not seen is tuned once: PyTorch's own call and the candidates of every
kernel family that covers the call (families.py: cuDNN's engine plans, Triton's and CUTLASS's causal convs) are
timed on the real operands, and the fastest name goes into the book.
"""

from __future__ import annotations

import statistics

import torch

from .conv_kernel import Runner, signature, torch_conv
from .families import FAMILIES, family_of
from .plan_book import PlanBook

PYTORCH_PLAN = "pytorch"  # the plan name of "call F.conv and let cuDNN's heuristics choose"
TIMING_REPS = 3


class TorchConvs:
    """PyTorch's convolutions (cuDNN heuristics on CUDA, the CPU kernels elsewhere)."""

    def __call__(self, x, weight, bias, stride, padding) -> torch.Tensor:
        return torch_conv(x, weight, bias, stride, padding)


class PlannedConvs:
    """Convolutions by recorded kernel plans (CUDA, bf16 or fp16)."""

    def __init__(self, book: PlanBook):
        self.book = book
        self._runners: dict[str, Runner] = {}
        self._prepared: dict = {}  # weights in the layouts the families' kernels read, made once per weight

    def __call__(self, x, weight, bias, stride, padding) -> torch.Tensor:
        key = signature(x, weight, bias, stride, padding)
        run = self._runners.get(key)
        if run is None:
            run = self._runners[key] = self._plan(key, x, weight, bias, stride, padding)
        return run(x, weight, bias)

    def _plan(self, key, x, weight, bias, stride, padding) -> Runner:
        name = self.book.choose(key, lambda: self._fastest(x, weight, bias, stride, padding))
        if name == PYTORCH_PLAN:
            return lambda x, weight, bias: torch_conv(x, weight, bias, stride, padding)
        family = family_of(name)
        if family is None:
            raise RuntimeError(f"the recorded plan {name!r} for the convolution {key} names no kernel family "
                               f"latentforge has ({', '.join(f.family for f in FAMILIES)}); the book comes from "
                               "another version (start over with --overwrite)")
        return family.runner(name, key, x, weight, bias, stride, padding, self._prepared)

    def _fastest(self, x, weight, bias, stride, padding) -> str:
        """Time PyTorch's call and every covering family's candidates on these operands; the fastest name."""
        timings = {PYTORCH_PLAN: _seconds(lambda: torch_conv(x, weight, bias, stride, padding))}
        for family in FAMILIES:
            if not family.covers(x, weight, bias, stride, padding):
                continue
            for name, run in family.candidates(x, weight, bias, stride, padding, self._prepared).items():
                try:
                    timings[name] = _seconds(lambda r=run: r(x, weight, bias))
                except Exception:  # noqa: BLE001 - a config that does not build, compile or fit is not a candidate
                    continue
        return min(timings, key=lambda n: (timings[n], n))


def _seconds(run) -> float:
    """Median seconds of run() on the GPU after one warm-up call."""
    run()
    samples = []
    for _ in range(TIMING_REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples) / 1e3
