"""The encoder's causal 3x3x3 conv in other layouts, each with every cuDNN plan timed: is any faster?

    out[t] = sum_dt conv2d(x[t + dt], w[:, :, dt])  (padding (0, 1, 1) in time, height, width)

- "3-D": the encoder's call (channels-last 3-D input with its two causal frames, [B, C, T+2, H, W]).
- "2-D stacked": a 2-D conv over T images whose 3C channels are frames t, t+1, t+2 side by side (a copy of the
  input, timed separately), weight [Cout, 3C, 3, 3]; the K loop then runs over 3C channels per spatial tap.
- "2-D on time-inner memory": the input kept as [H, W, T+2, C] in memory, where frames t..t+2 of a position are
  already 3C contiguous channels, seen as that 2-D input without a copy (overlapping strides).
- "3-D on time-inner memory": the encoder's 3-D conv reading that memory.

Every precompiled, deterministic plan of heuristics modes B, A and the fallback list is timed per layout, within
--budget-s, and checked against an fp32 conv for accuracy and for the same bits twice.

    python bench/conv_stacked.py --out stacked.json                  # the 96-channel conv (carry the cudnn frontend)
    python bench/conv_stacked.py --shape 192,192,40,240,416 ...      # any (C, Cout, frames, height, width)
    python bench/conv_stacked.py --tiny                              # CPU: each layout against F.conv3d, fp32
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conv_kernels import ConvShape, _graph, conv_inputs, cudnn_handle, plan_runner, timed  # noqa: E402
from conv_triton import fp32_reference, rel_l2  # noqa: E402


def stacked_input(x: torch.Tensor) -> torch.Tensor:
    """[1, C, T+2, H, W] -> [T, 3C, H, W] channels-last: channel dt*C + c of image t is x[c, t + dt]."""
    frames = x[0].permute(1, 2, 3, 0)  # [T+2, H, W, C]
    count = frames.shape[0] - 2
    return torch.cat([frames[dt:dt + count] for dt in range(3)], dim=-1).permute(0, 3, 1, 2)


def stacked_weight(w: torch.Tensor) -> torch.Tensor:
    """[Cout, C, 3, 3, 3] -> [Cout, 3C, 3, 3] in stacked_input's channel order, channels-last."""
    cout, channels = w.shape[:2]
    return w.permute(0, 2, 1, 3, 4).reshape(cout, 3 * channels, 3, 3).contiguous(memory_format=torch.channels_last)


def time_inner(x: torch.Tensor) -> torch.Tensor:
    """x's values in [H, W, T+2, C] memory, returned as the same logical [1, C, T+2, H, W] tensor."""
    memory = x[0].permute(2, 3, 1, 0).contiguous()  # [H, W, T+2, C]
    height, width, frames, channels = memory.shape
    return memory.as_strided((1, channels, frames, height, width),
                             (memory.numel(), 1, channels, width * frames * channels, frames * channels))


def time_inner_stacked(x_inner: torch.Tensor) -> torch.Tensor:
    """The [T, 3C, H, W] stacked input as a view of time-inner memory (image stride C: the views overlap)."""
    _, channels, frames, height, width = x_inner.shape
    return x_inner.as_strided((frames - 2, 3 * channels, height, width),
                              (channels, 1, width * frames * channels, frames * channels))


def layouts(x: torch.Tensor, w: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Each layout's (input, weight, output buffer); outputs of the 2-D layouts are [T, Cout, H, W]."""
    cout, (_, _, frames, height, width) = w.shape[0], x.shape
    out3 = torch.empty(1, cout, frames - 2, height, width, dtype=x.dtype, device=x.device).contiguous(
        memory_format=torch.channels_last_3d)
    out2 = torch.empty(frames - 2, cout, height, width, dtype=x.dtype, device=x.device).contiguous(
        memory_format=torch.channels_last)
    inner = time_inner(x)
    return {"3-D": (x, w, out3), "2-D stacked": (stacked_input(x), stacked_weight(w), out2),
            "2-D on time-inner memory": (time_inner_stacked(inner), stacked_weight(w), out2),
            "3-D on time-inner memory": (inner, w, out3)}


def as_3d(out: torch.Tensor) -> torch.Tensor:
    return out if out.dim() == 5 else out.permute(1, 0, 2, 3).unsqueeze(0)


def plan_rows(x, w, out, reference, args, flops) -> list[dict]:
    """Every precompiled deterministic cuDNN plan for this layout, fastest first (or the reason there is none)."""
    import cudnn

    handle = cudnn_handle(cudnn)
    modes = [cudnn.heur_mode.B, cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK]
    try:
        graph, operands, names = _graph(cudnn, handle, x, w, out, modes, False)
    except Exception as error:  # noqa: BLE001 - cuDNN refusing a layout is this layout's result
        return [{"plan": "(none)", "error": repr(error)[:300]}]
    rows, started = [], time.perf_counter()
    for name, index in names.items():
        if time.perf_counter() - started > args.budget_s:
            break
        try:
            run, _ = plan_runner(graph, operands, index, x, w, handle)
            first, second = run(torch.empty_like(out)), run(torch.empty_like(out))
            seconds = timed(lambda run=run: run(out), x.device, args.reps)
        except Exception as error:  # noqa: BLE001 - a plan that does not build or run is a row of the table
            rows.append({"plan": name, "error": repr(error)[:200]})
            continue
        rows.append({"plan": name, "seconds": seconds, "tflops": flops / seconds / 1e12,
                     "same_bits_twice": torch.equal(first, second), "rel_l2_vs_fp32": rel_l2(as_3d(first), reference)})
    return sorted(rows, key=lambda r: r.get("seconds", float("inf")))


def run_shape(shape: ConvShape, args) -> dict:
    device = torch.device(args.device)
    x, w = conv_inputs(shape, device)
    if device.type == "cpu":
        x, w = x.float(), w.float()
    reference = fp32_reference(x, w)
    result = {"conv": shape.describe() if device.type == "cuda" else shape.describe().replace("bf16", "fp32"),
              "layouts": {}}
    for label, (xl, wl, out) in layouts(x, w).items():
        if device.type == "cuda":
            rows = plan_rows(xl, wl, out, reference, args, shape.flops)
        else:  # PyTorch's CPU conv reads any strides: checks the layout's arithmetic
            value = (F.conv3d(xl, wl, None, padding=(0, 1, 1)) if xl.dim() == 5 else
                     F.conv2d(xl, wl, None, padding=1))
            rows = [{"plan": "pytorch (CPU)", "rel_l2_vs_fp32": rel_l2(as_3d(value), reference),
                     "max_abs_vs_conv3d": float((as_3d(value) - reference).abs().max())}]
        result["layouts"][label] = rows
    result["stacking_copy_s"] = timed(lambda: stacked_input(x), device, args.reps)
    return result


def print_table(result: dict) -> None:
    print(f"on {result['device']} (torch {result['torch']}, cuDNN {result['cudnn']})")
    for shape in result["shapes"]:
        print(f"\n{shape['conv']}; the stacking copy {shape['stacking_copy_s'] * 1e3:.3f} ms")
        print(f"{'layout':<26} {'plan':<44} {'ms':>8} {'TFLOP/s':>8} {'same bits':>9} {'rel-L2 fp32':>11}")
        for label, rows in shape["layouts"].items():
            for row in rows[:3]:
                if "error" in row:
                    print(f"{label:<26} {row['plan'][:44]:<44} ERROR {row['error'][:90]}")
                elif "seconds" not in row:
                    print(f"{label:<26} {row['plan'][:44]:<44} {'':>8} {'':>8} {'':>9} {row['rel_l2_vs_fp32']:11.3e}")
                else:
                    print(f"{label:<26} {row['plan'][:44]:<44} {row['seconds'] * 1e3:8.3f} {row['tflops']:8.1f} "
                          f"{str(row['same_bits_twice']):>9} {row['rel_l2_vs_fp32']:11.3e}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", action="append", help="input channels,output channels,output frames,height,width "
                                                         "(repeatable; default 96,96,40,480,832)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=15.0, help="stop timing a layout's plans after this long")
    parser.add_argument("--out")
    parser.add_argument("--tiny", action="store_true", help="CPU, fp32, a 8->16-channel conv of 4x6x10")
    args = parser.parse_args(argv)
    args.shape = args.shape or ["96,96,40,480,832"]
    if args.tiny:
        args.device, args.shape, args.reps = "cpu", ["8,16,4,6,10"], 1
    device = torch.device(args.device)
    result = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(),
              "shapes": [run_shape(ConvShape.parse(text), args) for text in args.shape]}
    print_table(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
