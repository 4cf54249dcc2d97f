"""A Triton implicit-GEMM forward kernel for the fast encoder's causal 3x3x3 convolution, timed against cuDNN.

The kernel (tokenizers/kernels/triton_conv.py, whose docstring gives the maths and the tiling) covers the encoder's
causal 3x3x3 convs; a build's plan pass offers it beside cuDNN's plans. This bench sweeps more configs than a
plan pass times and checks each against fp32 and for the same bits twice.

    python bench/kernels/conv_triton.py --out triton.json      # the four encoder shapes, cuDNN vs a config sweep (H200)
    python bench/kernels/conv_triton.py --shape 96,96,16,480,832 --config m128_k32_n64+32_g4_w4_s4
    TRITON_INTERPRET=1 python bench/kernels/conv_triton.py --tiny   # CPU: the kernel through Triton's interpreter
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from latentforge.tokenizers.kernels.triton_conv import (  # noqa: E402 - after the src path
    TAPS,
    ConvConfig,
    conv3d_causal,
    interpreting,
    power_of_two_split,
    triton,
    weight_taps,
)

FLOPS_PER_MAC = 2
MATMUL_SIZE = 8192

# (input channels, output channels, output frames, height, width): the biggest convs of the Wan2.1 encoder, with
# 16 output frames per call (the input holds 18).
DEFAULT_SHAPES = ("96,96,16,480,832", "96,192,16,240,416", "192,192,16,240,416", "384,384,16,120,208")


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


def sweep(channels: int, out_channels: int) -> list[ConvConfig]:
    """The configs tried for one conv (eight or nine). Up to 192 output channels one program covers them all (one
    or two power-of-two widths); wider, two programs of half (192 = 128 + 64) or one of 384 = 256 + 128. BLOCK_M
    64 to 256, K steps of 32, 64 and whole taps (64 + 32), 4 or 8 warps, 3 to 5 stages, 4 to 16 frames a group,
    and one narrower, cuDNN-like N tiling for comparison. On an H200 (triton 3.6), BLOCK_M 128 with K steps of 32
    and 4 warps was fastest up to 192 output channels, 256 + 128 with 8 warps at 384; the group size moved times
    by no more than the run-to-run noise (up to ~10 %)."""
    k_whole = power_of_two_split(channels)
    k_small = (32,) if channels % 32 == 0 else k_whole
    k_big = (64,) if channels % 64 == 0 else k_whole if len(k_whole) == 2 and sum(k_whole) <= 128 else k_small
    whole_n = power_of_two_split(out_channels)
    configs = []
    if whole_n and out_channels <= 192:
        n = whole_n
        stages = 4 if out_channels <= 96 else 3
        configs += [ConvConfig(128, k_small, n, 4, 4, stages), ConvConfig(128, k_small, n, 16, 4, stages),
                    ConvConfig(128, k_small, n, 8, 4, 7 - stages), ConvConfig(128, k_big, n, 8, 4, 3),
                    ConvConfig(128, k_small, n, 8, 8, 4), ConvConfig(128, k_big, n, 4, 8, 3),
                    ConvConfig(64, k_small, n, 4, 4, 5), ConvConfig(256, k_small, n, 8, 8, 3)]
    else:
        half = power_of_two_split(out_channels // 2)
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


def baseline(device: torch.device, book: Path | None = None):
    """(label, conv) of what a build runs: on a GPU with the cuDNN frontend, the plan a build's book records
    (tokenizers/kernels/planned_convs.py: the fastest of cuDNN's first candidate plans, PyTorch's call and the Triton
    configs, timed once on these operands; or the plan `book` holds for the signature); else PyTorch's call
    (autotuned on a GPU)."""
    if device.type == "cuda":
        try:
            from latentforge.tokenizers.kernels.plan_book import PlanBook, read_book
            from latentforge.tokenizers.kernels.planned_convs import PlannedConvs

            planned = PlannedConvs(PlanBook(entries=read_book(book)) if book else PlanBook())
            label = f"the plan {book.name} records" if book else "the plan a build records"
            return label, lambda x, w: planned(x, w, None, 1, (0, 1, 1))
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
    if device.type != "cuda" and not interpreting():
        return "a CPU run needs TRITON_INTERPRET=1 for the kernel: only the reference runs"
    return None


@dataclass
class Baseline:
    """One shape's operands, their fp32 conv, and what a build runs on them (its output, time and row)."""

    x: torch.Tensor
    w: torch.Tensor
    reference: torch.Tensor
    conv: object  # (x, w) -> output
    out: torch.Tensor
    seconds: float
    row: dict


def measure_baseline(shape: ConvShape, args, matmul: float | None) -> Baseline:
    device = torch.device(args.device)
    x, w = conv_inputs(shape, device)
    reference = fp32_reference(x, w)
    label, conv = baseline(device, getattr(args, "book", None))
    out, again, seconds = _twice(lambda: conv(x, w), device, args)
    return Baseline(x, w, reference, conv, out, seconds,
                    _row(label, seconds, shape, out, again, out, reference, seconds, matmul))


def run_shape(shape: ConvShape, configs: list[ConvConfig] | None, args, matmul: float | None) -> dict:
    device = torch.device(args.device)
    measured = measure_baseline(shape, args, matmul)
    x, w, reference, base, base_seconds = measured.x, measured.w, measured.reference, measured.out, measured.seconds
    rows = [measured.row]
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
            "cudnn": torch.backends.cudnn.version(), "interpreter": interpreting(), "matmul_tflops": matmul,
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
        Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
