"""How the fast encoder's convolutions could be run, timed side by side: PyTorch's cuDNN call with the
heuristics' choice and with autotuning (a timing race), and, when the cudnn frontend package is installed, every
engine plan cuDNN offers (heuristics modes B, A and the fallback list, runtime-compiled engines included and
marked), each by name, checked for the same bits on a second run. The question it answers: is there a plan
faster than the ones a build's plan book times (the first `CANDIDATE_PLANS` precompiled plans of modes B then A,
tokenizers/kernels/planned_convs.py), that a build could select by name, reproducibly?

    python bench/kernels/conv_kernels.py --out kernels.json            # the 96-channel conv (carry cudnn-frontend)
    python bench/kernels/conv_kernels.py --encoder --out kernels.json  # every main conv of a 93x480x832 encode
    python bench/kernels/conv_kernels.py --tiny                        # CPU: checks the script
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from latentforge.tokenizers.kernels.cudnn_graph import CANDIDATE_PLANS  # noqa: E402

FLOPS_PER_MAC = 2

# The causal 3x3x3 convs of the build path's 40-frame window at 93x480x832 (the shipped book's signatures):
# (input channels, output channels, output frames, height, width).
ENCODER_SHAPES = ("96,96,40,480,832", "96,192,40,240,416", "192,192,40,240,416", "192,384,20,120,208",
                  "384,384,20,120,208", "384,384,10,60,104")


@dataclass(frozen=True)
class ConvShape:
    channels: int
    out_channels: int
    frames: int  # output frames; the input holds two more (the causal padding)
    height: int
    width: int

    @classmethod
    def parse(cls, text: str) -> ConvShape:
        return cls(*(int(part) for part in text.split(",")))

    @property
    def flops(self) -> int:
        return FLOPS_PER_MAC * self.frames * self.height * self.width * self.channels * self.out_channels * 27

    def describe(self) -> str:
        return (f"[1,{self.channels},{self.frames + 2},{self.height},{self.width}] x "
                f"[{self.out_channels},{self.channels},3,3,3], padding (0,1,1), bf16, channels-last 3D")


def timed(fn, device: torch.device, reps: int) -> float:
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - started)
    return sorted(samples)[len(samples) // 2]


def conv_inputs(shape: ConvShape, device):
    generator = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(1, shape.channels, shape.frames + 2, shape.height, shape.width, generator=generator)
    w = torch.randn(shape.out_channels, shape.channels, 3, 3, 3, generator=generator) / (shape.channels * 27) ** 0.5
    x = x.to(device, torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    w = w.to(device, torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    return x, w


def torch_rows(x, w, reps, device, flops) -> tuple[list[dict], torch.Tensor]:
    rows = []
    reference = None
    for label, benchmark in (("pytorch cuDNN, heuristics", False), ("pytorch cuDNN, autotuned", True)):
        with torch.backends.cudnn.flags(enabled=True, benchmark=benchmark, deterministic=not benchmark):
            def run():
                return F.conv3d(x, w, None, padding=(0, 1, 1))

            first, second = run(), run()
            seconds = timed(run, device, reps)
        reference = first if reference is None else reference
        rows.append({"plan": label, "seconds": seconds, "tflops": flops / seconds / 1e12,
                     "same_bits_twice": torch.equal(first, second), "max_abs_vs_heuristics":
                     float((first.float() - reference.float()).abs().max())})
    return rows, reference


def _graph(cudnn, handle, x, w, out, modes, runtime_compiled: bool):
    """The conv's graph with its candidate plans, filtered as the build's plan book filters them (no
    reduced-precision or nondeterministic reductions; runtime-compiled engines only when asked). A 3-D conv
    is the causal one (padding (0, 1, 1)), a 2-D one pads both sides; the operands may have any strides."""
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    image, weight = (graph.tensor(name=name, dim=list(t.shape), stride=list(t.stride()),
                                  data_type=cudnn.data_type.BFLOAT16) for name, t in (("image", x), ("weight", w)))
    dims = x.dim() - 2
    y = graph.conv_fprop(image=image, weight=weight, padding=[0, 1, 1] if dims == 3 else [1, 1], stride=[1] * dims,
                         dilation=[1] * dims, compute_data_type=cudnn.data_type.FLOAT)
    y.set_output(True).set_data_type(cudnn.data_type.BFLOAT16).set_dim(list(out.shape)).set_stride(
        list(out.stride()))
    graph.validate()
    graph.build_operation_graph()
    graph.deselect_numeric_notes([cudnn.numerical_note.REDUCED_PRECISION_REDUCTION,
                                  cudnn.numerical_note.NONDETERMINISTIC])
    if not runtime_compiled:
        graph.deselect_behavior_notes([cudnn.behavior_note.RUNTIME_COMPILATION])
    graph.create_execution_plans(modes)
    names: dict[str, int] = {}
    for index in range(graph.get_execution_plan_count()):
        name = graph.get_plan_name_at_index(index)
        if name.startswith("eng") and name not in names:
            names[name] = index
    return graph, (image, weight, y), names


def cudnn_handle(cudnn):
    """A cuDNN handle on torch's current stream."""
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    return handle


def plan_runner(graph, operands, index: int, x, w, handle):
    """Builds plan `index` of `graph`; (run(target) -> target, the plan's workspace bytes)."""
    image, weight, y = operands
    graph.build_plan_at_index(index)
    size = graph.get_workspace_size_plan_at_index(index)
    workspace = torch.empty(max(size, 1), device=x.device, dtype=torch.uint8)

    def run(target: torch.Tensor) -> torch.Tensor:
        graph.execute_plan_at_index({image: x, weight: w, y: target}, workspace, index, handle)
        return target

    return run, size


def frontend_rows(x, w, reference, args, device, flops) -> tuple[list[dict], str | None]:
    """Every plan of the cudnn frontend for the same conv; (rows, None) or ([], why it could not run)."""
    try:
        import cudnn
    except Exception as error:  # noqa: BLE001 - an absent or broken package is a result, not a crash
        return [], f"cudnn frontend not importable: {error!r}"
    out = torch.empty_like(reference, memory_format=torch.channels_last_3d)
    try:
        handle = cudnn_handle(cudnn)
        _, _, book = _graph(cudnn, handle, x, w, out, [cudnn.heur_mode.B, cudnn.heur_mode.A], False)
        book_candidates = list(book)[:CANDIDATE_PLANS]
        modes = [cudnn.heur_mode.B, cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK]
        graph, operands, names = _graph(cudnn, handle, x, w, out, modes, True)
        print(f"frontend: {len(names)} engine plans ({len(book)} precompiled in modes B, A)", flush=True)
    except Exception:  # noqa: BLE001
        return [], "building the graph failed:\n" + traceback.format_exc()
    rows = []
    started_all = time.perf_counter()
    for name, index in list(names.items())[: args.max_plans]:
        if time.perf_counter() - started_all > args.budget_s:
            rows.append({"plan": name, "error": f"not timed: the shape's {args.budget_s} s budget ran out"})
            continue
        row = {"plan": name, "book_candidate": name in book_candidates}
        try:
            row["runtime_compiled"] = cudnn.behavior_note.RUNTIME_COMPILATION in set(
                graph.get_behavior_notes_for_plan_at_index(index))
        except Exception as error:  # noqa: BLE001 - the notes are a label, not a requirement
            row["runtime_compiled"] = f"unknown ({type(error).__name__})"
        try:
            started = time.perf_counter()
            run, size = plan_runner(graph, operands, index, x, w, handle)
            row["build_s"] = time.perf_counter() - started
            first = run(torch.empty_like(out))
            second = run(torch.empty_like(out))
            seconds = timed(lambda run=run: run(out), device, args.reps)
            row.update(seconds=seconds, tflops=flops / seconds / 1e12, workspace_mib=size / 2**20,
                       same_bits_twice=torch.equal(first, second),
                       max_abs_vs_heuristics=float((first.float() - reference.float()).abs().max()))
        except Exception as error:  # noqa: BLE001 - one failing plan is a row of the table
            row["error"] = repr(error)[:300]
        rows.append(row)
        print(f"  {row}", flush=True)
    return rows, None


def run_shape(shape: ConvShape, args) -> dict:
    device = torch.device(args.device)
    x, w = conv_inputs(shape, device)
    rows, reference = torch_rows(x, w, args.reps, device, shape.flops)
    why = "CPU run" if device.type != "cuda" else "not asked for (--no-frontend)"
    if device.type == "cuda" and not args.no_frontend:
        plans, why = frontend_rows(x, w, reference, args, device, shape.flops)
        rows += sorted(plans, key=lambda r: r.get("seconds", float("inf")))
    timed_plans = [row for row in rows if "seconds" in row and "book_candidate" in row]
    best = min(timed_plans, key=lambda r: r["seconds"], default=None)
    best_book = min((row for row in timed_plans if row["book_candidate"]), key=lambda r: r["seconds"], default=None)
    return {"conv": shape.describe(), "frontend_note": why, "rows": rows,
            "best_plan": best and best["plan"], "best_book_candidate": best_book and best_book["plan"],
            "best_vs_book": best and best_book and best_book["seconds"] / best["seconds"]}


def run(args) -> dict:
    device = torch.device(args.device)
    return {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "heuristics_mode_b": os.environ.get("TORCH_CUDNN_USE_HEURISTIC_MODE_B", ""),
            "shapes": [run_shape(ConvShape.parse(text), args) for text in args.shape]}


def print_table(result: dict) -> None:
    print(f"on {result['device']} (torch {result['torch']}, cuDNN {result['cudnn']})")
    for shape in result["shapes"]:
        print(f"\n{shape['conv']}")
        if shape["frontend_note"]:
            print(f"frontend: {shape['frontend_note'][:2000]}")
        print(f"{'plan':<56} {'book':>4} {'rtc':>4} {'ms':>8} {'TFLOP/s':>8} {'same bits':>9} {'max|d|':>8}")
        for row in shape["rows"]:
            flags = (f"{'yes' if row.get('book_candidate') else '':>4} "
                     f"{'yes' if row.get('runtime_compiled') is True else '':>4}")
            if "error" in row:
                print(f"{row['plan'][:56]:<56} {flags} ERROR {row['error'][:100]}")
                continue
            print(f"{row['plan'][:56]:<56} {flags} {row['seconds'] * 1e3:8.2f} {row['tflops']:8.1f} "
                  f"{str(row['same_bits_twice']):>9} {row['max_abs_vs_heuristics']:8.3g}")
        if shape["best_vs_book"]:
            print(f"fastest plan {shape['best_plan']}: {shape['best_vs_book']:.3f}x the fastest plan the book times "
                  f"({shape['best_book_candidate']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", action="append",
                        help="input channels,output channels,output frames,height,width (repeatable; default the "
                             "96-channel conv 96,96,32,480,832)")
    parser.add_argument("--encoder", action="store_true", help="every main conv of a 93x480x832 encode")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-frontend", action="store_true", help="only the PyTorch rows")
    parser.add_argument("--max-plans", type=int, default=64, help="build and time at most this many frontend plans")
    parser.add_argument("--budget-s", type=float, default=60.0, help="stop timing a shape's plans after this long")
    parser.add_argument("--out")
    parser.add_argument("--tiny", action="store_true", help="CPU, a 8-channel conv of 4x16x24")
    args = parser.parse_args(argv)
    args.shape = list(ENCODER_SHAPES) if args.encoder else args.shape or ["96,96,32,480,832"]
    if args.tiny:
        args.device, args.shape, args.reps = "cpu", ["8,8,4,16,24"], 2
    result = run(args)
    print_table(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
