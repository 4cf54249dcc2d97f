"""The causal 3x3x3 conv as CUTLASS's Hopper implicit GEMM with tiles N = 96 / 192, against the plan a build
records: can a kernel whose tiles fit 96 output channels beat cuDNN's 0.65 of the matmul rate there?

The kernels are C++ (bench/cutlass_conv/conv3d_sm90.cu), built for sm_90a by bench/cutlass_conv/build.sh into a
library with a C interface loaded through ctypes (static CUDA runtime, no PyTorch headers), so the build can run
on a machine without a GPU and the library carried to one:

    NVCC=/path/to/nvcc CUTLASS=/path/to/cutlass bash bench/cutlass_conv/build.sh        # -> bench/cutlass_conv/build/
    python bench/conv_cutlass.py --out cutlass.json                                   # an sm_90 GPU
    python bench/conv_cutlass.py --tiny                                               # CPU: the baseline only

Each config: the same bits twice, rel-L2 and max |diff| against an fp32 conv and against the baseline's output,
median time over --reps calls (CUDA events), and its speed against the baseline (bench/conv_triton.py's).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conv_triton import ConvShape, _format, _row, _twice, matmul_rate, measure_baseline  # noqa: E402

DEFAULT_LIBRARY = Path(__file__).resolve().parent / "cutlass_conv" / "build" / "libconv3d_sm90.so"
DEFAULT_SHAPES = ("96,96,40,480,832", "96,192,40,240,416", "192,192,41,240,416")
ERRORS = {1: "the config cannot run this problem (can_implement)", 2: "workspace too small",
          3: "initialize failed", 4: "the launch failed", 5: "a CUDA error after the launch"}


class CutlassConvs:
    """The library's configs, each a function (x, w) -> out for channels-last 3-D bf16 operands."""

    def __init__(self, path: Path):
        self.lib = lib = ctypes.CDLL(str(path))
        lib.lf_conv3d_config_count.restype = ctypes.c_int
        lib.lf_conv3d_config_name.restype = ctypes.c_char_p
        lib.lf_conv3d_config_name.argtypes = [ctypes.c_int]
        ints = [ctypes.c_int] * 6
        lib.lf_conv3d_workspace.argtypes = [ctypes.c_int, *ints, ctypes.POINTER(ctypes.c_size_t)]
        lib.lf_conv3d_run.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, *ints,
                                      ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self.names = [lib.lf_conv3d_config_name(i).decode() for i in range(lib.lf_conv3d_config_count())]

    def conv(self, name: str, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if not (x.is_contiguous(memory_format=torch.channels_last_3d) and
                w.is_contiguous(memory_format=torch.channels_last_3d)):
            raise ValueError("the CUTLASS conv takes channels-last 3-D operands")
        config = self.names.index(name)
        batch, channels, frames, height, width = x.shape
        dims = (batch, frames, height, width, channels, w.shape[0])
        size = ctypes.c_size_t(0)
        self._check(self.lib.lf_conv3d_workspace(config, *dims, ctypes.byref(size)), name)
        out = torch.empty(batch, w.shape[0], frames - 2, height, width, device=x.device, dtype=x.dtype,
                          memory_format=torch.channels_last_3d)
        workspace = torch.empty(max(size.value, 1), device=x.device, dtype=torch.uint8)
        self._check(self.lib.lf_conv3d_run(config, x.data_ptr(), w.data_ptr(), out.data_ptr(), *dims,
                                           workspace.data_ptr(), size.value,
                                           torch.cuda.current_stream(x.device).cuda_stream), name)
        return out

    @staticmethod
    def _check(code: int, name: str) -> None:
        if code:
            raise RuntimeError(f"CUTLASS config {name}: {ERRORS.get(code, f'error {code}')}")


def run_shape(text: str, convs: CutlassConvs | None, matmul, args) -> dict:
    shape = ConvShape.parse(text)
    print(shape.describe(), flush=True)
    measured = measure_baseline(shape, args, matmul)
    x, w, reference, base, base_seconds = measured.x, measured.w, measured.reference, measured.out, measured.seconds
    rows = [measured.row]
    print(f"  {_format(rows[0])}", flush=True)
    device = torch.device(args.device)
    for name in convs.names if convs else []:
        try:
            first, second, seconds = _twice(lambda n=name: convs.conv(n, x, w), device, args)
            row = _row(f"cutlass {name}", seconds, shape, first, second, base, reference, base_seconds, matmul)
        except Exception as error:  # noqa: BLE001 - a config that cannot run the shape is a row
            row = {"config": f"cutlass {name}", "error": f"{type(error).__name__}: {error}"[:300]}
        rows.append(row)
        print(f"  {_format(row)}", flush=True)
    return {"shape": text, "conv": shape.describe(), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--library", type=Path, default=DEFAULT_LIBRARY)
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
    device = torch.device(args.device)
    note = None
    if device.type != "cuda" or torch.cuda.get_device_capability(device) != (9, 0):
        note = "the CUTLASS kernels are built for sm_90a: only the baseline runs here"
    elif not args.library.exists():
        note = f"{args.library} does not exist: build it with bench/cutlass_conv/build.sh"
    convs = None if note else CutlassConvs(args.library)
    print(note or f"{len(convs.names)} CUTLASS configs: {', '.join(convs.names)}", flush=True)
    matmul = matmul_rate(device, args.reps)
    result = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "matmul_tflops": matmul, "note": note, "shapes": []}
    for text in args.shape:
        result["shapes"].append(run_shape(text, convs, matmul, args))
        if args.out:  # after every shape: a run cut short keeps what it measured
            Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
