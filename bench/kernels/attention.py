"""The Wan VAE encoder's mid-block attention (one head, D = 384 or 640, one frame per batch entry): SDPA against
the Triton kernel of tokenizers/wan/attention.py.

Each shape is timed for SDPA (what the encoder ran before the kernel) and for the kernel under its rule's configuration
(`config_for`) and a sweep of other ones; q, k and v are the three chunks of one [N, L, 3D] bf16 projection, as
the encoder makes them. A row gives the median milliseconds (CUDA events, after warm-up), TFLOP/s (4 N L^2 D
flops), the relative L2 error against a float64 reference, and whether two runs gave the same bits. A
configuration that fails to compile or launch (shared memory, registers) becomes a row with its error. `--tiny`
runs a small shape on the CPU through `single_head_attention`'s SDPA fallback (no Triton there).

    python bench/kernels/attention.py --out attention.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from latentforge.tokenizers.wan import attention as wan_attention  # noqa: E402
from latentforge.tokenizers.wan.attention import AttentionConfig, config_for  # noqa: E402

SHAPES = ((4, 6240, 384), (24, 6240, 384), (4, 3520, 640))  # frames, tokens (60x104; Wan2.2 44x80), head dim
TINY_SHAPES = ((2, 200, 128),)
# Other configurations tried next to the rule's, by head dim: (block_m, block_n, chunk, warps, stages[, splits]).
SWEEP = {
    384: ((64, 32, 128, 8, 3), (64, 32, 128, 4, 3), (64, 16, 128, 4, 3), (128, 16, 128, 8, 3), (128, 32, 64, 8, 2),
          (128, 32, 128, 8, 3), (64, 32, 128, 4, 3, 3)),
    640: ((64, 16, 128, 8, 3), (64, 16, 128, 8, 2), (64, 32, 128, 8, 1), (64, 32, 128, 8, 2), (64, 16, 64, 4, 3, 2),
          (128, 16, 64, 8, 2, 2), (64, 32, 128, 4, 2, 5)),
}


def operands(frames: int, length: int, head_dim: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """q, k, v as the encoder makes them: the chunks of one [N, L, 3D] projection (rows 3D apart)."""
    generator = torch.Generator(device=device).manual_seed(0)
    qkv = torch.randn(frames, length, 3 * head_dim, generator=generator, device=device).to(torch.bfloat16)
    return qkv.chunk(3, dim=-1)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v in float64, one frame at a time (the logits of all frames may not fit)."""
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    for frame in range(q.shape[0]):
        logits = q[frame].double() @ k[frame].double().T / q.shape[-1] ** 0.5
        out[frame] = torch.softmax(logits, dim=-1) @ v[frame].double()
    return out


def relative_l2(got: torch.Tensor, exact: torch.Tensor) -> float:
    return ((got.double() - exact).norm() / exact.norm()).item()


def timed_ms(fn, device: torch.device, reps: int) -> float:
    """Median milliseconds of fn() after two warm-up calls: CUDA events on a GPU, the wall clock elsewhere."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            begin = time.perf_counter()
            fn()
            times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """What the encoder runs today."""
    return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]


def parse_configs(text: str) -> dict[int, tuple[tuple[int, ...], ...]]:
    """--configs "384:128,32,128,8,2;640:64,16,128,8,3" -> {384: ((128, 32, 128, 8, 2),), 640: (...)}."""
    sweep: dict[int, list[tuple[int, ...]]] = {}
    for item in filter(None, text.split(";")):
        head_dim, values = item.split(":")
        sweep.setdefault(int(head_dim), []).append(tuple(int(value) for value in values.split(",")))
    return {head_dim: tuple(values) for head_dim, values in sweep.items()}


def candidates(head_dim: int, device: torch.device, sweep: dict) -> list[tuple[str, object]]:
    """(name, fn(q, k, v)) of every row: SDPA, then the kernel's rule and sweep (the fallback alone on a CPU)."""
    rows: list[tuple[str, object]] = [("sdpa", sdpa)]
    if device.type != "cuda" or wan_attention.triton is None:
        return rows + [("single_head_attention (fallback)", wan_attention.single_head_attention)]
    rule = config_for(head_dim)
    configs = [rule] + [c for c in (AttentionConfig(*values) for values in sweep.get(head_dim, ())) if c != rule]
    for config in configs:
        name = (f"{'rule ' if config == rule else ''}m{config.block_m} n{config.block_n} c{config.chunk} "
                f"w{config.warps} s{config.stages}{f' x{config.splits}' if config.splits > 1 else ''}")
        rows.append((name, lambda q, k, v, config=config: wan_attention.attention(q, k, v, config)))
    return rows


def measure(args: argparse.Namespace) -> dict:
    device = torch.device("cpu" if args.tiny else "cuda")
    shapes = TINY_SHAPES if args.tiny else SHAPES
    if args.shapes:
        shapes = [tuple(int(size) for size in shape.split(",")) for shape in args.shapes.split(";")]
    sweep = parse_configs(args.configs) if args.configs else SWEEP
    results = []
    for frames, length, head_dim in shapes:
        q, k, v = operands(frames, length, head_dim, device)
        exact = reference(q, k, v)
        flops = 4 * frames * length * length * head_dim
        print(f"N={frames} L={length} D={head_dim}")
        rows = []
        for name, fn in candidates(head_dim, device, sweep):
            try:
                first = fn(q, k, v)
                same = torch.equal(first, fn(q, k, v))
                ms = timed_ms(lambda fn=fn: fn(q, k, v), device, args.reps)
                row = {"config": name, "ms": ms, "tflops": flops / ms / 1e9, "rel_l2": relative_l2(first, exact),
                       "same_bits_twice": same, "error": None}
                print(f"  {name:<28} {ms:9.3f} ms {row['tflops']:7.1f} TFLOP/s rel-L2 {row['rel_l2']:.3e} "
                      f"same bits {same}", flush=True)
            except Exception as error:  # noqa: BLE001 - a failing configuration is a row, not the end of the run
                row = {"config": name, "ms": None, "tflops": None, "rel_l2": None, "same_bits_twice": None,
                       "error": f"{type(error).__name__}: {str(error)[:300]}"}
                print(f"  {name:<28} FAILED {row['error']}", flush=True)
            rows.append(row)
            if device.type == "cuda":
                torch.cuda.empty_cache()
        results.append({"frames": frames, "length": length, "head_dim": head_dim, "rows": rows})
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    return {"device": name, "shapes": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--tiny", action="store_true", help="a small shape on the CPU, through the SDPA fallback")
    parser.add_argument("--configs", help='configurations to sweep instead of the built-in ones, by head dim: '
                        '"384:128,32,128,8,2;640:64,16,128,8,3" (block_m, block_n, chunk, warps, stages[, splits])')
    parser.add_argument("--shapes", help='shapes instead of the built-in ones: "4,6240,384;4,3520,640" (N, L, D)')
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not args.tiny and not torch.cuda.is_available():
        print("needs a CUDA GPU (or --tiny for the CPU fallback)")
        return 1
    result = measure(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
