"""The causal 3x3x3 conv as CUTLASS's Hopper implicit GEMM with tiles N = 96 / 192 (every config the library
holds, not only the ones a plan pass times), against the plan a build records.

The kernels are latentforge's (tokenizers/kernels/cutlass/conv3d_sm90.cu), built by
tokenizers/kernels/cutlass/build.py into a
library with a C interface (static CUDA runtime, no PyTorch headers), here with every config the source holds
(the plan candidates and the ones measured to lose): on first use into the user's cache, or with --build DIR on a
machine without a GPU, to be carried to one with --library:

    LATENTFORGE_NVCC=/path/to/nvcc LATENTFORGE_CUTLASS=/path/to/cutlass \
        python bench/kernels/conv_cutlass.py --build DIR
    python bench/kernels/conv_cutlass.py --library DIR/conv3d_sm90_<digest>.so --out cutlass.json   # an sm_90 GPU
    python bench/kernels/conv_cutlass.py --tiny                                             # CPU: the baseline only

Each config: the same bits twice, rel-L2 and max |diff| against an fp32 conv and against the baseline's output,
median time over --reps calls (CUDA events), and its speed against the baseline (bench/kernels/conv_triton.py's).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conv_triton import ConvShape, _format, _row, _twice, matmul_rate, measure_baseline  # noqa: E402

from latentforge.tokenizers.kernels.cutlass import build as cutlass_build  # noqa: E402
from latentforge.tokenizers.kernels.cutlass import conv as cutlass_conv  # noqa: E402

DEFAULT_SHAPES = ("96,96,40,480,832", "96,192,40,240,416", "192,192,41,240,416")


def run_shape(text: str, kernels: cutlass_conv.CutlassKernels | None, matmul, args) -> dict:
    shape = ConvShape.parse(text)
    print(shape.describe(), flush=True)
    measured = measure_baseline(shape, args, matmul)
    x, w, reference, base, base_seconds = measured.x, measured.w, measured.reference, measured.out, measured.seconds
    rows = [measured.row]
    print(f"  {_format(rows[0])}", flush=True)
    device = torch.device(args.device)
    for name in kernels.labels if kernels else []:
        try:
            first, second, seconds = _twice(lambda n=name: kernels.conv(n, x, w), device, args)
            row = _row(f"cutlass {name}", seconds, shape, first, second, base, reference, base_seconds, matmul)
        except Exception as error:  # noqa: BLE001 - a config that cannot run the shape is a row
            row = {"config": f"cutlass {name}", "error": f"{type(error).__name__}: {error}"[:300]}
        rows.append(row)
        print(f"  {_format(row)}", flush=True)
    return {"shape": text, "conv": shape.describe(), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--library", type=Path, help="a built library (default: build it into the user's cache)")
    parser.add_argument("--build", type=Path, metavar="DIR", help="only build the library into DIR (no GPU needed)")
    parser.add_argument("--shape", action="append", help="C,Cout,frames,height,width (repeatable)")
    parser.add_argument("--book", type=Path, help="a plan book whose plans the baseline replays (default: time "
                                                  "the candidates as a build would)")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out")
    parser.add_argument("--tiny", action="store_true", help="CPU: the baseline of a small conv, no CUTLASS")
    args = parser.parse_args(argv)
    args.shape = args.shape or list(DEFAULT_SHAPES)
    if args.tiny:
        args.device, args.shape, args.reps, args.warmup = "cpu", ["8,16,2,6,10"], 1, 0
    if args.book and not args.book.exists():
        parser.error(f"--book {args.book} does not exist")
    if args.build:
        print(cutlass_build.library(directory=args.build, every_config=True))
        return 0
    device = torch.device(args.device)
    kernels, note = None, None
    if device.type != "cuda" or torch.cuda.get_device_capability(device) != (9, 0):
        note = "the CUTLASS kernels are built for sm_90a: only the baseline runs here"
    elif args.library:
        kernels = cutlass_conv.CutlassKernels(args.library, "(carried)")
    elif found := cutlass_conv.toolchain():
        kernels = cutlass_conv.CutlassKernels(cutlass_build.library(found, every_config=True), found.cutlass_version)
    else:
        note = f"CUTLASS's library cannot be built here: {cutlass_build.FIX}"
    print(note or f"{len(kernels.labels)} CUTLASS configs: {', '.join(kernels.labels)}", flush=True)
    matmul = matmul_rate(device, args.reps)
    result = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "matmul_tflops": matmul, "note": note, "shapes": []}
    for text in args.shape:
        result["shapes"].append(run_shape(text, kernels, matmul, args))
        if args.out:  # after every shape: a run cut short keeps what it measured
            Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
