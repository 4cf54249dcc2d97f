"""How the fast encoder's biggest convolution could be run, timed side by side: PyTorch's cuDNN call with the
heuristics' choice (the default, reproducible) and with autotuning (a timing race), and, when the cudnn
frontend package is installed, every engine plan cuDNN offers for it, each by name, checked for the same bits
on a second run. The question it answers: is there a plan faster than the heuristics' choice that a build
could select by name, reproducibly?

    python bench/conv_kernels.py --out kernels.json            # on a GPU (carry nvidia-cudnn-frontend)
    python bench/conv_kernels.py --tiny                        # CPU: checks the script
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

FLOPS_PER_MAC = 2


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


def conv_inputs(args, device):
    generator = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(1, args.channels, args.frames + 2, args.height, args.width, generator=generator)
    w = torch.randn(args.channels, args.channels, 3, 3, 3, generator=generator) / (args.channels * 27) ** 0.5
    x = x.to(device, torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    w = w.to(device, torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    return x, w


def torch_rows(x, w, args, device, flops) -> tuple[list[dict], torch.Tensor]:
    rows = []
    reference = None
    for label, benchmark in (("pytorch cuDNN, heuristics", False), ("pytorch cuDNN, autotuned", True)):
        with torch.backends.cudnn.flags(enabled=True, benchmark=benchmark, deterministic=not benchmark):
            def run():
                return F.conv3d(x, w, None, padding=(0, 1, 1))

            first, second = run(), run()
            seconds = timed(run, device, args.reps)
        reference = first if reference is None else reference
        rows.append({"plan": label, "seconds": seconds, "tflops": flops / seconds / 1e12,
                     "same_bits_twice": torch.equal(first, second), "max_abs_vs_heuristics":
                     float((first.float() - reference.float()).abs().max())})
    return rows, reference


def frontend_rows(x, w, reference, args, device, flops) -> tuple[list[dict], str | None]:
    """Every plan of the cudnn frontend for the same conv; (rows, None) or ([], why it could not run)."""
    try:
        import cudnn
    except Exception as error:  # noqa: BLE001 - an absent or broken package is a result, not a crash
        return [], f"cudnn frontend not importable: {error!r}"
    try:
        handle = cudnn.create_handle()
        cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
        graph = cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=handle)
        image, weight = graph.tensor_like(x), graph.tensor_like(w)
        out = torch.empty_like(reference, memory_format=torch.channels_last_3d)
        y = graph.conv_fprop(image=image, weight=weight, padding=[0, 1, 1], stride=[1, 1, 1], dilation=[1, 1, 1],
                             compute_data_type=cudnn.data_type.FLOAT)
        y.set_output(True).set_data_type(cudnn.data_type.BFLOAT16).set_dim(list(out.shape)).set_stride(
            list(out.stride()))
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.B, cudnn.heur_mode.A])
        graph.check_support()
        count = graph.get_execution_plan_count()
        print(f"frontend: {count} candidate plans", flush=True)
    except Exception:  # noqa: BLE001
        return [], "building the graph failed:\n" + traceback.format_exc()
    rows = []
    for index in range(min(count, args.max_plans)):
        row = {"plan": f"frontend #{index}"}
        try:
            started = time.perf_counter()
            graph.build_plan_at_index(index)
            row["build_s"] = time.perf_counter() - started
            row["plan"] = f"frontend #{index} {graph.get_plan_name_at_index(index)}"
            size = graph.get_workspace_size_plan_at_index(index)
            workspace = torch.empty(max(size, 1), device=device, dtype=torch.uint8)

            def run(target, i=index, ws=workspace):
                graph.execute_plan_at_index({image: x, weight: w, y: target}, ws, i, handle)
                return target

            first = run(torch.empty_like(out)).clone()
            second = run(torch.empty_like(out)).clone()
            seconds = timed(lambda: run(out), device, args.reps)
            row.update(seconds=seconds, tflops=flops / seconds / 1e12, workspace_mib=size / 2**20,
                       same_bits_twice=torch.equal(first, second),
                       max_abs_vs_heuristics=float((first.float() - reference.float()).abs().max()))
        except Exception as error:  # noqa: BLE001 - one failing plan is a row of the table
            row["error"] = repr(error)[:300]
        rows.append(row)
        print(f"  {row}", flush=True)
    return rows, None


def run(args) -> dict:
    device = torch.device(args.device)
    x, w = conv_inputs(args, device)
    flops = FLOPS_PER_MAC * args.frames * args.height * args.width * args.channels * args.channels * 27
    rows, reference = torch_rows(x, w, args, device, flops)
    why = "CPU run" if device.type != "cuda" else "not asked for (--no-frontend)"
    if device.type == "cuda" and not args.no_frontend:
        plans, why = frontend_rows(x, w, reference, args, device, flops)
        rows += sorted(plans, key=lambda r: r.get("seconds", float("inf")))
    return {"conv": f"[1,{args.channels},{args.frames + 2},{args.height},{args.width}] x "
                    f"[{args.channels},{args.channels},3,3,3], padding (0,1,1), bf16, channels-last 3D",
            "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "heuristics_mode_b": os.environ.get("TORCH_CUDNN_USE_HEURISTIC_MODE_B", ""),
            "frontend_note": why, "rows": rows}


def print_table(result: dict) -> None:
    print(f"{result['conv']} on {result['device']} (torch {result['torch']}, cuDNN {result['cudnn']})")
    if result["frontend_note"]:
        print(f"frontend: {result['frontend_note'][:2000]}")
    print(f"{'plan':<70} {'ms':>8} {'TFLOP/s':>8} {'same bits':>9} {'max|d|':>8}")
    for row in result["rows"]:
        if "error" in row:
            print(f"{row['plan'][:70]:<70} ERROR {row['error'][:100]}")
            continue
        print(f"{row['plan'][:70]:<70} {row['seconds'] * 1e3:8.2f} {row['tflops']:8.1f} "
              f"{str(row['same_bits_twice']):>9} {row['max_abs_vs_heuristics']:8.3g}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--channels", type=int, default=96)
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=832)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-frontend", action="store_true", help="only the PyTorch rows")
    parser.add_argument("--max-plans", type=int, default=24, help="build and time at most this many frontend plans")
    parser.add_argument("--out")
    parser.add_argument("--tiny", action="store_true", help="CPU, a 8-channel conv of 4x16x24")
    args = parser.parse_args(argv)
    if args.tiny:
        args.device, args.channels, args.frames, args.height, args.width, args.reps = "cpu", 8, 4, 16, 24, 2
    result = run(args)
    print_table(result)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
