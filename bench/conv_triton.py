"""A Triton implicit-GEMM forward kernel for the fast encoder's causal 3x3x3 convolution, timed against cuDNN.

The call (tokenizers/wan21_fast.py, `_causal_conv`): input `padded` [B, C, T+2, H, W] bf16, channels-last 3D
(memory order B,T,H,W,C; its two leading frames are the causal padding, already in the buffer), weight
[Cout, C, 3, 3, 3], padding (0, 1, 1), stride 1, no bias, fp32 accumulation, output [B, Cout, T, H, W] bf16
channels-last 3D:

    out[b, n, t, h, w] = sum_{dt, dh, dw, c} padded[b, c, t + dt, h + dh - 1, w + dw - 1] * weight[n, c, dt, dh, dw]

with zeros where h + dh - 1 or w + dw - 1 falls outside the frame (t + dt never does: t indexes the padded
buffer). As a GEMM: M = B*T*H*W output positions (each a row of Cout contiguous channels), N = Cout,
K = 27 taps x C, where the A row of position (b, t, h, w) for tap (dt, dh, dw) is the C channels of input
position (b, t + dt, h + dh - 1, w + dw - 1), a constant offset from the row of tap (0, 1, 1). The weight is
rearranged once to `weight_taps` [27, C, Cout] (tap = 9 dt + 3 dh + dw, then input, then output channel).

One program computes BLOCK_M consecutive positions of one frame (flattened over its rows: a tile can span the
end of one image row and the start of the next) x a run of output channels given as one or two power-of-two
widths (96 = 64 + 32, 192 = 128 + 64, 48 = 32 + 16): the two dots share the A tile, so no output lane is padded
away (cuDNN's Hopper kernels tile N by 64, so 96 channels cost 128 lanes). Several such runs (a grid axis over
N) can cover wider outputs (384 = 2 x (128 + 64) or 3 x 128; 256 + 128 in one program was faster). The K loop
is one flat loop over taps x channel blocks (a block is one or two power-of-two widths: 96 = 3 x 32 or
64 + 32), so Triton's software pipeliner sees a single loop of loads feeding dots. fp32 accumulators, one bf16
rounding at the store; a fixed K order, no split-K and no atomics, so the result is deterministic. Programs
are ordered so that GROUP consecutive frames of the same spatial tile run together: tap dt of frame t reads
input frame t + dt, which frames t + 1 and t + 2 read again, so a group shares those reads in L2 instead of
re-reading them from memory a frame later (measured on an H200, the group size mattered less than the noise).

    python bench/conv_triton.py --out triton.json      # the four encoder shapes, cuDNN vs a config sweep (H200)
    python bench/conv_triton.py --shape 96,96,16,480,832 --config m128_k32_n64+32_g4_w4_s4
    TRITON_INTERPRET=1 python bench/conv_triton.py --tiny   # CPU: the kernel through Triton's interpreter
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

try:  # Triton ships with CUDA builds of torch; without it only the reference runs.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the torch build
    triton = None

FLOPS_PER_MAC = 2
TAPS = 27
MATMUL_SIZE = 8192

# (input channels, output channels, output frames, height, width): the biggest convs of the Wan2.1 encoder, with
# 16 output frames per call (the input holds 18).
DEFAULT_SHAPES = ("96,96,16,480,832", "96,192,16,240,416", "192,192,16,240,416", "384,384,16,120,208")


@dataclass(frozen=True)
class ConvConfig:
    """One program's tile and the launch: `block_m` output positions x sum(`n_split`) output channels (one or two
    power-of-two widths sharing the A tile; Cout / sum(n_split) programs along N), K in steps of sum(`k_split`)
    channels of one tap (one or two power-of-two widths), `group` frames per spatial tile in the launch order."""

    block_m: int = 128
    k_split: tuple[int, ...] = (32,)
    n_split: tuple[int, ...] = (64, 32)
    group: int = 4
    num_warps: int = 8
    num_stages: int = 4

    @property
    def label(self) -> str:
        k = "+".join(map(str, self.k_split))
        n = "+".join(map(str, self.n_split))
        return f"m{self.block_m}_k{k}_n{n}_g{self.group}_w{self.num_warps}_s{self.num_stages}"

    @classmethod
    def parse(cls, label: str) -> ConvConfig:
        fields = {part[0]: part[1:] for part in label.split("_")}
        return cls(int(fields["m"]), tuple(int(v) for v in fields["k"].split("+")),
                   tuple(int(v) for v in fields["n"].split("+")), int(fields.get("g", 4)),
                   int(fields.get("w", 8)), int(fields.get("s", 4)))

    def check(self, channels: int, out_channels: int) -> None:
        """Raises ValueError where the config cannot cover this conv exactly."""
        for name, widths in (("k_split", self.k_split), ("n_split", self.n_split), ("block_m", (self.block_m,))):
            if not 1 <= len(widths) <= 2 or any(v < 16 or v & (v - 1) for v in widths):
                raise ValueError(f"{name} {widths}: one or two powers of two, each at least 16")
        if channels % sum(self.k_split):
            raise ValueError(f"k_split {self.k_split} does not divide {channels} input channels")
        if out_channels % sum(self.n_split):
            raise ValueError(f"n_split {self.n_split} does not divide {out_channels} output channels")


def weight_taps(weight: torch.Tensor) -> torch.Tensor:
    """[Cout, C, 3, 3, 3] -> [27, C, Cout] contiguous, tap = 9 dt + 3 dh + dw."""
    out_channels, channels = weight.shape[:2]
    return weight.permute(2, 3, 4, 1, 0).reshape(TAPS, channels, out_channels).contiguous()


def conv3d_causal(padded: torch.Tensor, taps: torch.Tensor, config: ConvConfig) -> torch.Tensor:
    """The causal conv of `padded` [B, C, T+2, H, W] (channels contiguous) with `taps` [27, C, Cout]: a new
    [B, Cout, T, H, W] channels-last 3D tensor in padded's dtype."""
    if triton is None:
        raise RuntimeError("triton is not importable")
    batch, channels, padded_frames, height, width = padded.shape
    out_channels = taps.shape[2]
    if taps.shape != (TAPS, channels, out_channels) or not taps.is_contiguous():
        raise ValueError(f"taps {tuple(taps.shape)}: want a contiguous [27, {channels}, Cout]")
    if padded.stride(1) != 1:
        raise ValueError("padded must be channels-last (channel stride 1)")
    config.check(channels, out_channels)
    frames = padded_frames - 2
    out = torch.empty((batch, out_channels, frames, height, width), device=padded.device, dtype=padded.dtype,
                      memory_format=torch.channels_last_3d)
    last = sum((size - 1) * stride for size, stride in zip(padded.shape, padded.stride()))
    if max(last, out.numel()) >= 2**31:
        raise ValueError("offsets past 2**31 elements: the kernel computes them in int32")
    tiles = triton.cdiv(height * width, config.block_m)
    n_programs = out_channels // sum(config.n_split)
    k_a, k_b = (*config.k_split, 0)[:2]
    n_a, n_b = (*config.n_split, 0)[:2]
    grid = (batch * frames * tiles * n_programs,)
    _conv3d_causal_kernel[grid](
        padded, taps, out, frames, height, width, tiles, batch * frames,
        padded.stride(0), padded.stride(2), padded.stride(3), padded.stride(4),
        C=channels, COUT=out_channels, BLOCK_M=config.block_m, K_A=k_a, K_B=k_b, K_B_SHAPE=k_b or 16,
        N_A=n_a, N_B=n_b, N_B_SHAPE=n_b or 16, N_PROGRAMS=n_programs, GROUP=config.group,
        DOT_FP32=_interpreting(),
        num_warps=config.num_warps, num_stages=config.num_stages)
    return out


if triton is not None:

    @triton.jit
    def _tap_tile(x_ptr, row, ok, c0, KW: tl.constexpr):
        """The A tile of one tap: KW channels from c0 of the rows `row` (masked rows read zeros)."""
        k = c0 + tl.arange(0, KW)
        return tl.load(x_ptr + row[:, None] + k[None, :], mask=ok[:, None], other=0.0)

    @triton.jit
    def _weight_tile(w_ptr, k0, n0, COUT: tl.constexpr, KW: tl.constexpr, NW: tl.constexpr):
        """Rows k0.. (of the [27 * C, Cout] weight) x columns n0.., KW x NW."""
        k = k0 + tl.arange(0, KW)
        n = n0 + tl.arange(0, NW)
        return tl.load(w_ptr + k[:, None] * COUT + n[None, :])

    @triton.jit
    def _mma(a, b, acc, DOT_FP32: tl.constexpr):
        """acc + a @ b; DOT_FP32 (the interpreter, whose bf16 dot is wrong) widens the bf16 operands first, which
        is the same maths: a product of two bf16 values is exact in fp32."""
        if DOT_FP32:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        return tl.dot(a, b, acc)

    @triton.jit
    def _conv3d_causal_kernel(x_ptr, w_ptr, out_ptr, frames, height, width, tiles, total_frames, stride_b,
                              stride_t, stride_h, stride_w, C: tl.constexpr, COUT: tl.constexpr,
                              BLOCK_M: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr,
                              K_B_SHAPE: tl.constexpr, N_A: tl.constexpr, N_B: tl.constexpr,
                              N_B_SHAPE: tl.constexpr, N_PROGRAMS: tl.constexpr, GROUP: tl.constexpr,
                              DOT_FP32: tl.constexpr):
        # Launch order: the N programs of a tile are adjacent (they read the same A rows), then GROUP frames of
        # the same spatial tile, then the next tile.
        pid = tl.program_id(0)
        pid_n = pid % N_PROGRAMS
        pid_m = pid // N_PROGRAMS
        per_group = GROUP * tiles
        first = (pid_m // per_group) * GROUP
        group_size = tl.minimum(total_frames - first, GROUP)
        within = pid_m % per_group
        frame = first + within % group_size  # b * T + t
        tile = within // group_size
        sample = frame // frames
        t = frame % frames
        area = height * width
        pos = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = pos < area
        h = pos // width
        w = pos % width
        # Offset of input (b, t + 0, h, w): tap (dt, dh, dw) reads base + a per-tap scalar shift.
        base = sample * stride_b + t * stride_t + h * stride_h + w * stride_w
        n0 = pid_n * (N_A + N_B)
        acc_a = tl.zeros([BLOCK_M, N_A], dtype=tl.float32)
        acc_b = tl.zeros([BLOCK_M, N_B_SHAPE], dtype=tl.float32)
        STEP: tl.constexpr = K_A + K_B
        BLOCKS: tl.constexpr = C // STEP
        for it in range(27 * BLOCKS):
            tap = it // BLOCKS
            c0 = (it - tap * BLOCKS) * STEP
            dt = tap // 9
            dh = (tap // 3) % 3 - 1
            dw = tap % 3 - 1
            hh = h + dh
            ww = w + dw
            ok = row_ok & (hh >= 0) & (hh < height) & (ww >= 0) & (ww < width)
            row = base + (dt * stride_t + dh * stride_h + dw * stride_w)
            k0 = tap * C + c0
            a = _tap_tile(x_ptr, row, ok, c0, K_A)
            acc_a = _mma(a, _weight_tile(w_ptr, k0, n0, COUT, K_A, N_A), acc_a, DOT_FP32)
            if N_B > 0:
                acc_b = _mma(a, _weight_tile(w_ptr, k0, n0 + N_A, COUT, K_A, N_B_SHAPE), acc_b, DOT_FP32)
            if K_B > 0:
                a2 = _tap_tile(x_ptr, row, ok, c0 + K_A, K_B_SHAPE)
                acc_a = _mma(a2, _weight_tile(w_ptr, k0 + K_A, n0, COUT, K_B_SHAPE, N_A), acc_a, DOT_FP32)
                if N_B > 0:
                    acc_b = _mma(a2, _weight_tile(w_ptr, k0 + K_A, n0 + N_A, COUT, K_B_SHAPE, N_B_SHAPE), acc_b,
                                 DOT_FP32)
        out_row = (frame * area + pos) * COUT + n0
        tl.store(out_ptr + out_row[:, None] + tl.arange(0, N_A)[None, :], acc_a.to(out_ptr.dtype.element_ty),
                 mask=row_ok[:, None])
        if N_B > 0:
            tl.store(out_ptr + out_row[:, None] + N_A + tl.arange(0, N_B_SHAPE)[None, :],
                     acc_b.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


# --- the bench -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvShape:
    channels: int
    out_channels: int
    frames: int  # output frames; the input holds two more (the causal padding)
    height: int
    width: int
    batch: int = 1

    @classmethod
    def parse(cls, text: str) -> ConvShape:
        return cls(*(int(part) for part in text.split(",")))

    @property
    def flops(self) -> int:
        return (FLOPS_PER_MAC * self.batch * self.frames * self.height * self.width * self.channels
                * self.out_channels * TAPS)

    def describe(self) -> str:
        return (f"[{self.batch},{self.channels},{self.frames + 2},{self.height},{self.width}] x "
                f"[{self.out_channels},{self.channels},3,3,3], padding (0,1,1), bf16, channels-last 3D")


def _split(width: int) -> tuple[int, ...]:
    """width as one power of two, or the sum of two (96 = 64 + 32); () where it is neither."""
    high = 1 << (width.bit_length() - 1)
    rest = width - high
    return (width,) if not rest else (high, rest) if rest & (rest - 1) == 0 else ()


def sweep(channels: int, out_channels: int) -> list[ConvConfig]:
    """The configs tried for one conv (eight or nine). Up to 192 output channels one program covers them all (one
    or two power-of-two widths); wider, two programs of half (192 = 128 + 64) or one of 384 = 256 + 128. BLOCK_M
    64 to 256, K steps of 32, 64 and whole taps (64 + 32), 4 or 8 warps, 3 to 5 stages, 4 to 16 frames a group,
    and one narrower, cuDNN-like N tiling for comparison. On an H200 (triton 3.6), BLOCK_M 128 with K steps of 32
    and 4 warps was fastest up to 192 output channels, 256 + 128 with 8 warps at 384; the group size moved times
    by no more than the run-to-run noise (up to ~10 %)."""
    k_whole = _split(channels)
    k_small = (32,) if channels % 32 == 0 else k_whole
    k_big = (64,) if channels % 64 == 0 else k_whole if len(k_whole) == 2 and sum(k_whole) <= 128 else k_small
    whole_n = _split(out_channels)
    configs = []
    if whole_n and out_channels <= 192:
        n = whole_n
        stages = 4 if out_channels <= 96 else 3
        configs += [ConvConfig(128, k_small, n, 4, 4, stages), ConvConfig(128, k_small, n, 16, 4, stages),
                    ConvConfig(128, k_small, n, 8, 4, 7 - stages), ConvConfig(128, k_big, n, 8, 4, 3),
                    ConvConfig(128, k_small, n, 8, 8, 4), ConvConfig(128, k_big, n, 4, 8, 3),
                    ConvConfig(64, k_small, n, 4, 4, 5), ConvConfig(256, k_small, n, 8, 8, 3)]
    else:
        half = _split(out_channels // 2)
        if whole_n and out_channels <= 384:
            configs += [ConvConfig(128, k_small, whole_n, 8, 8, 3), ConvConfig(128, k_small, whole_n, 16, 8, 4),
                        ConvConfig(64, k_small, whole_n, 8, 4, 3)]
        if half and out_channels // 2 <= 256:
            configs += [ConvConfig(128, k_small, half, 8, 4, 3), ConvConfig(128, k_big, half, 8, 4, 3),
                        ConvConfig(128, k_small, half, 8, 8, 3)]
        configs += [ConvConfig(128, k_small, (128,), 4, 8, 4), ConvConfig(256, k_big, (128,), 4, 8, 3)]
    narrow = 64  # the cuDNN-like tiling of N by 64, for comparison
    if out_channels % narrow == 0 and narrow < out_channels <= 192:
        configs += [ConvConfig(128, k_big, (narrow,), 4, 4, 4)]
    return list(dict.fromkeys(configs))


def conv_inputs(shape: ConvShape, device: torch.device):
    generator = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(shape.batch, shape.channels, shape.frames + 2, shape.height, shape.width, generator=generator)
    w = torch.randn(shape.out_channels, shape.channels, 3, 3, 3, generator=generator) / (shape.channels * 27) ** 0.5
    x = x.to(device, torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    w = w.to(device, torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    return x, w


def cudnn_conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """PyTorch's fastest deterministic pick: cuDNN autotuned (a timing race among its plans)."""
    with torch.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=True, allow_tf32=False):
        return F.conv3d(x, w, None, padding=(0, 1, 1))


def baseline(device: torch.device):
    """(label, conv) of what a build runs: on a GPU with the cuDNN frontend, the plan a build's book records
    (tokenizers/cudnn_convs.py: the fastest of cuDNN's first candidate plans and PyTorch's call, timed once on
    these operands); else PyTorch's call (autotuned on a GPU)."""
    if device.type == "cuda":
        try:
            from latentforge.tokenizers.cudnn_convs import PlannedConvs
            from latentforge.tokenizers.plan_book import PlanBook

            planned = PlannedConvs(PlanBook())
            return "cuDNN, the plan a build records", lambda x, w: planned(x, w, None, 1, (0, 1, 1))
        except ImportError:
            return "cuDNN autotuned (deterministic)", cudnn_conv
    return "torch F.conv3d (CPU)", cudnn_conv


def fp32_reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The same bf16 operands convolved in fp32 (no TF32)."""
    with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True, allow_tf32=False):
        return F.conv3d(x.float(), w.float(), None, padding=(0, 1, 1))


def timed(fn, device: torch.device, reps: int, warmup: int = 2) -> float:
    """Median seconds of `reps` calls (CUDA events on a GPU, wall clock on the CPU) after `warmup` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3)
        else:
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
    return sorted(samples)[len(samples) // 2]


def _twice(fn, device: torch.device, args) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Two results of fn (for the same-bits check) and its median time. On the CPU (the interpreter is slow) the
    time is the second call's."""
    first = fn()
    if device.type == "cuda":
        return first, fn(), timed(fn, device, args.reps, args.warmup)
    started = time.perf_counter()
    second = fn()
    return first, second, time.perf_counter() - started


def matmul_rate(device: torch.device, reps: int) -> float | None:
    """bf16 torch.mm of 8192^3 in TFLOP/s (the ceiling each row is a fraction of); None on the CPU."""
    if device.type != "cuda":
        return None
    generator = torch.Generator(device="cpu").manual_seed(1)
    a, b = (torch.randn(MATMUL_SIZE, MATMUL_SIZE, generator=generator).to(device, torch.bfloat16) for _ in range(2))
    seconds = timed(lambda: torch.mm(a, b), device, max(reps, 10), warmup=3)
    return FLOPS_PER_MAC * MATMUL_SIZE**3 / seconds / 1e12


def rel_l2(value: torch.Tensor, reference: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(value.float() - reference) / torch.linalg.vector_norm(reference))


def _row(label: str, seconds: float, shape: ConvShape, first, second, cudnn_out, reference, base_seconds,
         matmul) -> dict:
    tflops = shape.flops / seconds / 1e12
    return {"config": label, "seconds": seconds, "tflops": tflops,
            "vs_cudnn": base_seconds / seconds if base_seconds else None,
            "of_matmul": tflops / matmul if matmul else None,
            "rel_l2_vs_fp32": rel_l2(first, reference),
            "max_abs_vs_fp32": float((first.float() - reference).abs().max()),
            "max_abs_vs_cudnn": float((first.float() - cudnn_out.float()).abs().max()),
            "same_bits_twice": torch.equal(first, second)}


def triton_note(device: torch.device) -> str | None:
    """Why the Triton kernel cannot run here, or None."""
    if triton is None:
        return "triton not importable: only the reference runs"
    if device.type != "cuda" and not _interpreting():
        return "a CPU run needs TRITON_INTERPRET=1 for the kernel: only the reference runs"
    return None


def _interpreting() -> bool:
    return triton is not None and triton.knobs.runtime.interpret


def run_shape(shape: ConvShape, configs: list[ConvConfig] | None, args, matmul: float | None) -> dict:
    device = torch.device(args.device)
    x, w = conv_inputs(shape, device)
    reference = fp32_reference(x, w)
    label, conv = baseline(device)
    base, again, base_seconds = _twice(lambda: conv(x, w), device, args)
    rows = [_row(label, base_seconds, shape, base, again, base, reference, base_seconds, matmul)]
    note = triton_note(device)
    configs = configs if configs is not None else sweep(shape.channels, shape.out_channels)
    if note is None:
        taps = weight_taps(w)
        for config in configs:
            try:
                first, second, seconds = _twice(lambda c=config: conv3d_causal(x, taps, c), device, args)
                row = _row(config.label, seconds, shape, first, second, base, reference, base_seconds, matmul)
            except Exception as error:  # noqa: BLE001 - a config that fails to compile or run is a row
                row = {"config": config.label, "error": f"{type(error).__name__}: {error}"[:400]}
                if args.verbose:
                    traceback.print_exc()
            rows.append(row)
            print(f"  {_format(row)}", flush=True)
    timed_rows = [row for row in rows[1:] if "seconds" in row]
    best = min(timed_rows, key=lambda r: r["seconds"], default=None)
    return {"conv": shape.describe(), "shape": shape.__dict__, "flops": shape.flops, "triton_note": note,
            "rows": rows, "best_config": best and best["config"], "best_vs_cudnn": best and best["vs_cudnn"]}


def _format(row: dict) -> str:
    if "error" in row:
        return f"{row['config'][:40]:<40} ERROR {row['error'][:150]}"
    ratio = f"{row['vs_cudnn']:7.3f}" if row["vs_cudnn"] is not None else f"{'':>7}"
    matmul = f"{row['of_matmul']:8.3f}" if row["of_matmul"] is not None else f"{'':>8}"
    return (f"{row['config'][:40]:<40} {row['seconds'] * 1e3:9.3f} {row['tflops']:8.1f} {ratio} {matmul} "
            f"{row['rel_l2_vs_fp32']:10.3e} {row['max_abs_vs_cudnn']:9.3g} {str(row['same_bits_twice']):>5}")


def print_table(result: dict) -> None:
    matmul = result["matmul_tflops"]
    print(f"\non {result['device']} (torch {result['torch']}, triton {result['triton']}, cuDNN {result['cudnn']}); "
          f"bf16 mm {MATMUL_SIZE}^3: " + (f"{matmul:.1f} TFLOP/s" if matmul else "not measured"))
    for shape in result["shapes"]:
        print(f"\n{shape['conv']}")
        if shape["triton_note"]:
            print(f"triton: {shape['triton_note']}")
        print(f"{'config':<40} {'ms':>9} {'TFLOP/s':>8} {'x cuDNN':>7} {'of mm':>8} {'relL2 fp32':>10} "
              f"{'|d| cuDNN':>9} {'same':>5}")
        for row in shape["rows"]:
            print(_format(row))
        if shape["best_config"]:
            print(f"fastest config {shape['best_config']}: {shape['best_vs_cudnn']:.3f}x cuDNN's speed")


def run(args) -> dict:
    device = torch.device(args.device)
    matmul = matmul_rate(device, args.reps)
    configs = [ConvConfig.parse(label) for label in args.config] if args.config else None
    shapes = []
    for text in args.shape:
        shape = ConvShape.parse(text)
        print(f"{shape.describe()}", flush=True)
        shapes.append(run_shape(shape, configs, args, matmul))
    return {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "triton": triton.__version__ if triton is not None else None,
            "cudnn": torch.backends.cudnn.version(), "interpreter": _interpreting(), "matmul_tflops": matmul,
            "shapes": shapes}


TINY_SHAPE = "32,48,3,9,13"  # 48 = 32 + 16 output channels; 117 positions a frame (not a multiple of 64)
TINY_CONFIGS = ("m64_k16_n32+16_g2_w4_s2", "m64_k16+16_n16_g1_w4_s2")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", action="append",
                        help="input channels,output channels,output frames,height,width[,batch] (repeatable; "
                             f"default {' '.join(DEFAULT_SHAPES)})")
    parser.add_argument("--config", action="append",
                        help="a config label such as m128_k32_n64+32_g4_w8_s4 (repeatable; default a sweep)")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls before the timed ones")
    parser.add_argument("--out")
    parser.add_argument("--verbose", action="store_true", help="print the traceback of a failing config")
    parser.add_argument("--tiny", action="store_true",
                        help=f"CPU, the conv {TINY_SHAPE} (the kernel runs with TRITON_INTERPRET=1)")
    args = parser.parse_args(argv)
    args.shape = args.shape or list(DEFAULT_SHAPES)
    if args.tiny:
        args.device, args.shape = "cpu", [TINY_SHAPE]
        args.config = args.config or list(TINY_CONFIGS)
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    started = time.perf_counter()
    result = run(args)
    result["wall_s"] = time.perf_counter() - started
    print_table(result)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
