"""Timing probes of the encode benches: median timing with peak memory, the bf16 matmul ceiling, the copy
bandwidth, a per-kernel profile, and the per-layer roofline (each conv inside the encoder vs the same conv alone)."""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F

from latentforge.tokenizers.wan.fast_encoder import FastWanEncoder


def timed(fn, device: torch.device, reps: int, warm: bool = False) -> tuple[float, float, torch.Tensor]:
    """Median seconds and peak GiB of fn() after one warm-up call (none when the caller says fn is `warm`: it
    already ran on these inputs; the peak then still covers only the timed calls)."""
    out = None if warm else fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else float("nan")
    return statistics.median(times), peak, out


def matmul_tflops(device: torch.device, size: int) -> float:
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    seconds, _, _ = timed(lambda: a @ b, device, 5)
    return 2 * size**3 / seconds / 1e12


def copy_bandwidth(device: torch.device, gib: float) -> float:
    """Bytes per second read + written by one large device copy."""
    src = torch.empty(int(gib * 2**30) // 2, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    seconds, _, _ = timed(lambda: dst.copy_(src), device, 5)
    return 2 * src.numel() * src.element_size() / seconds


def profile_kernels(fn, video: torch.Tensor, out: Path) -> None:
    """Where one (warm) encode spends GPU time, by kernel, written to `out` and printed."""
    from torch.profiler import ProfilerActivity, profile

    fn(video)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn(video)
        torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=30, max_name_column_width=90)
    out.write_text(table)
    print(table)


def per_layer_roofline(fast: FastWanEncoder, video: torch.Tensor, device: torch.device) -> list[dict]:
    """Each conv3d inside one fast encode, timed in place, against the same conv timed alone."""
    if device.type != "cuda":
        return []
    calls: list[tuple[tuple, float]] = []
    original = F.conv3d

    def recording(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = original(x, weight, bias, stride, padding, dilation, groups)
        end.record()
        torch.cuda.synchronize()
        key = (tuple(x.shape), tuple(weight.shape), str(stride), str(padding))
        calls.append((key, start.elapsed_time(end) / 1e3))
        return out

    F.conv3d = recording
    try:
        fast(video)
    finally:
        F.conv3d = original
    grouped: dict[tuple, list[float]] = defaultdict(list)
    for key, seconds in calls:
        grouped[key].append(seconds)
    rows = []
    for (x_shape, w_shape, stride, padding), seconds in grouped.items():
        x = torch.randn(x_shape, device=device, dtype=fast.dtype).contiguous(memory_format=torch.channels_last_3d)
        w = torch.randn(w_shape, device=device, dtype=fast.dtype).contiguous(memory_format=torch.channels_last_3d)
        st, pd = eval(stride), eval(padding)  # noqa: S307 - our own repr of ints/tuples
        alone, _, out = timed(lambda: original(x, w, None, st, pd), device, 3)
        flops = 2 * out.numel() * w_shape[1] * w_shape[2] * w_shape[3] * w_shape[4]
        rows.append({"input": list(x_shape), "weight": list(w_shape), "calls": len(seconds),
                     "in_encoder_s": sum(seconds), "alone_s": alone * len(seconds),
                     "tflops_alone": flops / alone / 1e12})
    return sorted(rows, key=lambda r: -r["in_encoder_s"])
