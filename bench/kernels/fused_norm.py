"""The fast encoder's fused bias + residual + RMS norm + SiLU pass: bandwidth of each tiling on the encoder's shapes.

Each row times `add_rms_silu` the way the Wan2.1 encoder calls it at one width (96 channels at 480x832, 192 at
240x416, 384 at 120x208, one 33-frame window), under one Tiling (rows per program, channel blocks, warps), and
reports the bytes it reads and writes per second against a plain device copy measured in the same run. The first
tiling per width and pass is the rule the encoder uses (wan21_kernels.tiling); every other one must give the same
sum bits and a norm within one bf16 step of it, or the row says so. `--tiny` runs small shapes (needs a GPU: the
pass is a Triton kernel).

    python bench/kernels/fused_norm.py --out fused-norm.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_common"))

from _encode_probes import copy_bandwidth, timed  # noqa: E402

from latentforge.tokenizers.wan import fused_norm as wan21_kernels  # noqa: E402
from latentforge.tokenizers.wan.fused_norm import Tiling, tiling  # noqa: E402

WIDTHS = {96: (480, 832), 192: (240, 416), 384: (120, 208)}
CASES = ("norm of a residual sum into the next conv's buffer", "norm of a conv output with its bias",
         "residual add into a zero-padded buffer")


def channels_last(shape, device) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.bfloat16, device=device,
                       memory_format=torch.channels_last_3d).normal_()


def operands(case: str, channels: int, frames: int, height: int, width: int, device) -> tuple[dict, int]:
    """add_rms_silu's arguments as the encoder passes them, and the bytes the pass moves."""
    shape = (1, channels, frames, height, width)
    a = channels_last(shape, device)
    bias = torch.rand(channels, device=device) - 0.5
    weight = torch.rand(channels, device=device) + 0.5
    step = a.numel() * a.element_size()
    if case == CASES[2]:
        padded = channels_last((1, channels, frames, height + 1, width + 1), device)
        return {"a": a, "b": channels_last(shape, device), "weight": None, "norm_out": None,
                "sum_out": padded[:, :, :, :height, :width], "bias": bias}, 3 * step
    buffer = channels_last((1, channels, frames + 2, height, width), device)
    if case == CASES[0]:
        return {"a": a, "b": channels_last(shape, device), "weight": weight, "norm_out": buffer[:, :, 2:],
                "sum_out": channels_last(shape, device), "bias": bias}, 4 * step
    return {"a": a, "b": None, "weight": weight, "norm_out": buffer[:, :, 2:], "sum_out": None, "bias": bias}, 2 * step


def tilings(channels: int, arguments: dict) -> list[Tiling]:
    """The rule's tiling for this pass first, then channel blocks and padded channels at 16-64 rows, 4 or 8 warps."""
    rule = tiling(channels, arguments["sum_out"] is not None, arguments["norm_out"] is not None)
    block_c = min(channels & -channels, 128)
    padded_c = 1 << (channels - 1).bit_length()
    candidates = [rule]
    for parts, block in ((channels // block_c, block_c), (1, padded_c)):
        for rows in (16, 32, 64):  # 128 rows ran at 0.02-0.9 of the copy rate on an H200: never the best
            for warps in (4, 8):
                candidates.append(Tiling(parts, block, rows, warps))
    return list(dict.fromkeys(candidates))


def outputs(arguments: dict) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(sum, norm) as written, each None where the case writes none."""
    return tuple(None if arguments[name] is None else arguments[name].clone() for name in ("sum_out", "norm_out"))


def same_result(got: tuple, reference: tuple) -> bool:
    """The sum bit for bit, the norm within one bf16 step (it reduces in another order)."""
    total, norm = got
    sum_equal = total is None or torch.equal(total, reference[0])
    return sum_equal and (norm is None or torch.allclose(norm.float(), reference[1].float(), rtol=2**-7, atol=1e-30))


def measure(args: argparse.Namespace) -> dict:
    device = torch.device("cuda")
    bandwidth = copy_bandwidth(device, 2.0)
    rows = []
    for channels, (height, width) in WIDTHS.items():
        if args.tiny:
            height, width = height // 8, width // 8
        for case in CASES:
            arguments, moved = operands(case, channels, args.frames, height, width, device)
            reference = None
            for layout in tilings(channels, arguments):
                run = lambda: wan21_kernels._launch(**arguments, layout=layout)  # noqa: E731
                seconds, _, _ = timed(run, device, args.reps)
                got = outputs(arguments)
                reference = reference or got
                agrees = same_result(got, reference)
                rows.append({"channels": channels, "case": case, "tiling": layout.__dict__, "ms": seconds * 1e3,
                             "gb_per_s": moved / seconds / 1e9, "of_copy": moved / seconds / bandwidth,
                             "agrees_with_rule": agrees})
                print(f"{channels:4d} {case[:34]:<34} parts {layout.parts} block {layout.block_c:4d} rows "
                      f"{layout.rows:4d} warps {layout.warps}: {seconds * 1e3:7.3f} ms "
                      f"{moved / seconds / 1e9:6.0f} GB/s {moved / seconds / bandwidth:5.2f} of copy "
                      f"{'' if agrees else 'DIFFERENT RESULT'}", flush=True)
    return {"device": torch.cuda.get_device_name(), "copy_gb_per_s": bandwidth / 1e9, "frames": args.frames,
            "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=33, help="frames of one encoder window")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="shapes 8x smaller in each spatial direction")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or wan21_kernels.triton is None:
        print("needs a CUDA GPU with Triton: the fused pass is a Triton kernel")
        return 1
    result = measure(args)
    print(f"copy bandwidth {result['copy_gb_per_s']:.0f} GB/s")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
