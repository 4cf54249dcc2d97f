"""The encoder's causal 3x3x3 conv with TMA tile loads, and with the next norm pass in its epilogue, against cuDNN.

An experiment, not a plan the encoder runs. The implicit-GEMM kernel of tokenizers/triton_conv.py gathers its A
rows with masked pointer loads; this one loads each tap's tile with a TMA descriptor over the padded input
[B, T+2, H, W, C]: a box of BH x BW positions of one frame (x a block of channels) whose out-of-frame rows and
columns the hardware fills with zeros, so the spatial padding costs no masks. One program holds BH*BW positions x
every output channel (96 = 64 + 32 as two dots sharing the A tile), so the encoder's next pass
(wan21_kernels.add_rms_silu: bias, residual, RMS norm over the channels, SiLU) can run on the tile before it is
stored: the "fused" rows, against the same conv followed by the separate pass, in the two forms the encoder needs
(after a block's first conv: bias + norm into the next conv's frame-padded buffer; after its second: bias +
residual, the sum and its norm). Every row checks its bits twice and against an fp32 conv; a fused row counts the
norm values that differ from the separate pass (the sum of squares added in another order).

    python bench/conv_tma.py --out tma.json                  # H200: a tile/K/warps/stages sweep per shape
    python bench/conv_tma.py --shape 96,96,16,480,832 --config "96,96,16,480,832=tma4x32_k32_n64+32_g4_w8_s3"
    TRITON_INTERPRET=1 python bench/conv_tma.py --tiny      # CPU: the kernels through Triton's interpreter
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tma_conv import TmaConfig, conv3d_tma  # noqa: E402
from conv_triton import ConvShape, _format, _row, _twice, matmul_rate, measure_baseline, timed  # noqa: E402

from latentforge.tokenizers.triton_conv import ConvConfig, conv3d_causal, interpreting, triton, weight_taps  # noqa: E402
from latentforge.tokenizers.wan21_kernels import add_rms_silu  # noqa: E402

DEFAULT_SHAPES = ("96,96,16,480,832", "96,192,16,240,416", "192,192,16,240,416")
TINY_SHAPE = "32,48,2,9,13"
TINY_CONFIGS = ("tma2x8_k16_n32+16_g2_w4_s2", "tma4x8_k16+16_n32+16_g1_w4_s2")
TINY_POINTER_CONFIG = "m64_k16_n32+16_g2_w4_s2"


def sweep(channels: int, out_channels: int) -> list[TmaConfig]:
    """Tiles of 128 positions (1x128 to 8x16) on 4 warps and of 256 (2x128, 4x64) on 8; K steps of 32 or a whole
    tap (64 + 32) / 64; 3 or 4 stages. One program covers 96 (64 + 32) or 192 (128 + 64) output channels."""
    n = (64, 32) if out_channels == 96 else (128, 64) if out_channels == 192 else (out_channels,)
    ks = [(32,), (64, 32)] if channels == 96 else [(32,), (64,)]
    tiles = ((1, 128), (2, 64), (4, 32), (8, 16), (2, 128), (4, 64)) if out_channels <= 96 else (
        (1, 128), (4, 32), (2, 128))
    configs = []
    for bh, bw in tiles:
        warps = 4 if bh * bw == 128 else 8
        configs += [TmaConfig(bh, bw, k, n, 4, warps, stages) for k in ks for stages in (3, 4)]
    return configs


def pointer_configs(out_channels: int) -> list[ConvConfig]:
    """The encoder's Triton kernel (masked pointer loads) in the two configs a plan pass times."""
    n = (64, 32) if out_channels == 96 else (128, 64)
    return [ConvConfig(128, (32,), n, 4, 4, 4), ConvConfig(128, (32,), n, 8, 4, 3)]


def fused_rows(shape: ConvShape, x, w, taps, conv, configs: list[TmaConfig], args) -> list[dict]:
    """Each config with the encoder's next pass in its epilogue, against it and cuDNN's plan followed by the
    separate pass (add_rms_silu), after a block's first conv (bias + norm) and its second (bias + residual: the sum
    and its norm)."""
    device = x.device
    generator = torch.Generator(device="cpu").manual_seed(2)
    cout = shape.out_channels
    bias = (torch.rand(cout, generator=generator) * 0.2 - 0.1).to(device)
    gains = ((torch.rand(cout, generator=generator) + 0.5) * cout**0.5).to(device)
    residual_input = torch.randn(shape.batch, cout, shape.frames, shape.height, shape.width,
                                 generator=generator).to(device, torch.bfloat16).contiguous(
        memory_format=torch.channels_last_3d)
    following = torch.zeros(shape.batch, cout, shape.frames + 2, shape.height, shape.width, device=device,
                            dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    sums = torch.zeros_like(residual_input)
    rows = []

    def separate(run_conv, residual):
        def run():
            add_rms_silu(run_conv(), residual, gains, following[:, :, 2:],
                         sum_out=sums if residual is not None else None, bias=bias)
        return run

    for case, residual in (("after conv1: bias + norm", None), ("after conv2: bias + residual, sum + norm",
                                                               residual_input)):
        runs = {"cuDNN plan + separate pass": separate(lambda: conv(x, w), residual)}
        for cfg in configs:
            runs[f"{cfg.label} + separate pass"] = separate(lambda c=cfg: conv3d_tma(x, taps, c), residual)
            runs[f"{cfg.label} fused"] = (lambda c=cfg, r=residual: conv3d_tma(
                x, taps, c, bias=bias, residual=r, norm_weight=gains, norm_out=following, write_out=r is not None))
        outputs = {}
        for name, run in runs.items():
            try:
                run()
                first = (following.clone(), sums.clone())
                run()
                again = (following.clone(), sums.clone())
                seconds = timed(run, device, args.reps, args.warmup)
                outputs[name] = first
                row = {"case": case, "run": name, "ms": seconds * 1e3,
                       "same_bits_twice": all(torch.equal(a, b) for a, b in zip(first, again))}
                unfused = outputs.get(name.replace(" fused", " + separate pass"))
                if name.endswith(" fused") and unfused is not None:
                    gap = (first[0].float() - unfused[0].float()).abs()
                    row.update(norm_values_differing=int((gap > 0).sum()), norm_max_abs_diff=float(gap.max()),
                               sum_equal=torch.equal(first[1], unfused[1]) if residual is not None else None)
            except Exception as error:  # noqa: BLE001 - a config that fails to compile or run is a row
                traceback.print_exc(limit=2)
                row = {"case": case, "run": name, "error": f"{type(error).__name__}: {error}"[:300]}
            rows.append(row)
            print(f"    {_format_fused(row)}", flush=True)
    return rows


def _format_fused(row: dict) -> str:
    if "error" in row:
        return f"{row['case'][:40]:<40} {row['run'][:44]:<44} ERROR {row['error'][:120]}"
    extra = ""
    if "norm_values_differing" in row:
        extra = f" norm values differing {row['norm_values_differing']} (max {row['norm_max_abs_diff']:.3g})"
        extra += f", sum equal {row['sum_equal']}" if row["sum_equal"] is not None else ""
    return f"{row['case'][:40]:<40} {row['run'][:44]:<44} {row['ms']:8.3f} ms same bits {row['same_bits_twice']}{extra}"


def run_shape(text: str, configs: list[TmaConfig], pointers: list[ConvConfig], fuse: list[TmaConfig] | None,
              matmul, args) -> dict:
    shape = ConvShape.parse(text)
    print(shape.describe(), flush=True)
    device = torch.device(args.device)
    measured = measure_baseline(shape, args, matmul)
    x, w, reference, base, base_seconds = measured.x, measured.w, measured.reference, measured.out, measured.seconds
    rows = [measured.row]
    print(f"  {_format(rows[0])}", flush=True)
    taps = weight_taps(w)
    kernels = [(f"pointer {c.label}", lambda c=c: conv3d_causal(x, taps, c)) for c in pointers]
    kernels += [(c.label, lambda c=c: conv3d_tma(x, taps, c)) for c in configs]
    for name, kernel in kernels:
        try:
            first, second, seconds = _twice(kernel, device, args)
            row = _row(name, seconds, shape, first, second, base, reference, base_seconds, matmul)
        except Exception as error:  # noqa: BLE001 - a config that fails to compile or run is a row
            traceback.print_exc(limit=2)
            row = {"config": name, "error": f"{type(error).__name__}: {error}"[:300]}
        rows.append(row)
        print(f"  {_format(row)}", flush=True)
    if fuse is None:  # the three fastest TMA configs that gave the same bits twice
        ranked = sorted((r for r in rows if r.get("same_bits_twice") and r["config"].startswith("tma")),
                        key=lambda r: r["seconds"])
        fuse = [TmaConfig.parse(r["config"]) for r in ranked[:3]]
    fused = fused_rows(shape, x, w, taps, measured.conv, fuse, args) if shape.out_channels <= 192 else []
    return {"shape": text, "conv": shape.describe(), "rows": rows, "fused": fused}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append",
                        help=f"input channels,output channels,output frames,height,width (default "
                             f"{' '.join(DEFAULT_SHAPES)})")
    parser.add_argument("--config", action="append", default=[],
                        help="SHAPE=LABEL,LABEL: time only these TMA configs at that shape, alone and fused")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tiny", action="store_true",
                        help=f"CPU, the conv {TINY_SHAPE} (needs TRITON_INTERPRET=1)")
    args = parser.parse_args(argv)
    if triton is None:
        print("triton is not importable: nothing to run", file=sys.stderr)
        return 2
    args.device = "cpu" if args.tiny else "cuda"
    if args.tiny:  # the interpreter takes seconds a call: one timed call each
        args.reps, args.warmup = 1, 0
    if args.tiny and not interpreting():
        print("--tiny runs the kernels through Triton's interpreter: set TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    if not args.tiny and not torch.cuda.is_available():
        print("no CUDA device (use --tiny with TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    chosen = dict(item.split("=", 1) for item in args.config)
    shapes = [TINY_SHAPE] if args.tiny else args.shape or list(DEFAULT_SHAPES)
    matmul = matmul_rate(torch.device(args.device), args.reps)
    result = {"device": torch.cuda.get_device_name() if not args.tiny else "cpu (interpreter)",
              "torch": torch.__version__, "triton": triton.__version__, "matmul_tflops": matmul, "shapes": []}
    for text in shapes:
        shape = ConvShape.parse(text)
        if args.tiny:
            configs = [TmaConfig.parse(label) for label in TINY_CONFIGS]
            pointers, fuse = [ConvConfig.parse(TINY_POINTER_CONFIG)], configs
        elif text in chosen:
            configs = [TmaConfig.parse(label) for label in chosen[text].split(",")]
            pointers, fuse = [], configs
        else:
            configs, pointers, fuse = sweep(shape.channels, shape.out_channels), pointer_configs(
                shape.out_channels), None
        result["shapes"].append(run_shape(text, configs, pointers, fuse, matmul, args))
        if args.out:  # after every shape: a run cut short keeps what it measured
            args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
