"""Re-times a plan book's causal 3x3x3 convolutions against the Triton conv plans (and, on an sm_90 GPU that can
build CUTLASS's conv library, the CUTLASS plans) and writes the book with the winners: a signature's recorded plan
stays unless a Triton or CUTLASS config is faster by more than the margin.

A build's plan pass picks each signature's plan by timing a handful of candidates once; the books that ship with
latentforge were recorded before the Triton plans existed. This re-times exactly the signatures a book holds,
on operands of their recorded shapes and strides, with the recorded plan and each Triton candidate
interleaved over several rounds (one noisy moment cannot favour one side), and keeps the recorded plan where
the two are within the margin, so a book only changes where the gain is real. Every switched signature is
checked: the same bits twice, and its rel-L2 to the fp32 conv against the recorded plan's. PyTorch's call (the
plan `pytorch`) runs with cuDNN's heuristics in mode B, as in the fast path's processes.

    python bench/tools/retime_book.py --book src/latentforge/tokenizers/kernels/books/KEY.json --out new.json \
        --report r.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from latentforge.tokenizers.kernels import triton_conv  # noqa: E402 - after the src path
from latentforge.tokenizers.kernels.cutlass import conv as cutlass_conv  # noqa: E402 - after the src path
from latentforge.tokenizers.kernels.plan_book import PlanBook, read_book  # noqa: E402
from latentforge.tokenizers.kernels.planned_convs import PlannedConvs  # noqa: E402
from latentforge.tokenizers.wan.common import prefer_heuristics_mode_b  # noqa: E402

SIGNATURE = re.compile(r"^x\[([\d, ]+)\]:\[([\d, ]+)\] w\[([\d, ]+)\]:\[([\d, ]+)\] s\[([\d, ]+)\] p\[([\d, ]+)\] "
                       r"bias=(True|False) (\w+)$")
FLOPS_PER_MAC = 2


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def parse(signature: str) -> dict | None:
    """The shapes and strides of a causal 3x3x3 conv signature the Triton kernel covers; None for any other."""
    match = SIGNATURE.match(signature)
    if match is None:
        return None
    x_shape, x_stride, w_shape, w_stride, stride, padding = (ints(match[i]) for i in range(1, 7))
    if (len(x_shape) != 5 or w_shape[2:] != [3, 3, 3] or stride != [1, 1, 1] or padding != [0, 1, 1]
            or match[7] == "True" or match[8] != "bfloat16" or x_stride[1] != 1):
        return None
    if not triton_conv.candidates(x_shape[1], w_shape[0]):
        return None
    return {"x_shape": x_shape, "x_stride": x_stride, "w_shape": w_shape, "w_stride": w_stride}


def operands(conv: dict, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.empty_strided(conv["x_shape"], conv["x_stride"], dtype=torch.bfloat16, device="cuda")
    w = torch.empty_strided(conv["w_shape"], conv["w_stride"], dtype=torch.bfloat16, device="cuda")
    x.normal_(generator=generator)
    w.normal_(generator=generator).mul_((27 * conv["w_shape"][1]) ** -0.5)
    return x, w


def one_call_seconds(run) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def fp32_conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True, allow_tf32=False):
        return F.conv3d(x.float(), w.float(), None, padding=(0, 1, 1))


def rel_l2(value: torch.Tensor, reference: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(value.float() - reference) / torch.linalg.vector_norm(reference))


def retime(signature: str, recorded: str, conv: dict, args) -> dict:
    x, w = operands(conv, seed=len(signature))
    planned = PlannedConvs(PlanBook(entries={signature: recorded}))
    runs = {recorded: lambda: planned(x, w, None, 1, (0, 1, 1))}
    taps = triton_conv.weight_taps(w)
    for config in triton_conv.candidates(conv["x_shape"][1], conv["w_shape"][0]):
        runs[triton_conv.plan_name(config)] = lambda c=config: triton_conv.conv3d_causal(x, taps, c)
    kernels = cutlass_conv.kernels() if cutlass_conv.covers(x, w, None, 1, (0, 1, 1)) else None
    for label in cutlass_conv.candidates(conv["x_shape"][1], conv["w_shape"][0]) if kernels else ():
        runs[cutlass_conv.plan_name(label, kernels.version)] = lambda c=label: kernels.conv(c, x, w)
    errors = {}
    for name, run in list(runs.items()):
        try:
            for _ in range(args.warmup):
                run()
        except Exception as error:  # noqa: BLE001 - a config that does not compile or fit is no candidate
            errors[name] = f"{type(error).__name__}: {error}"[:300]
            del runs[name]
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):  # interleaved: each round times every candidate once
        for name, run in runs.items():
            samples[name].append(one_call_seconds(run))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    challengers = [name for name in medians if name != recorded
                   and (triton_conv.is_plan_name(name) or cutlass_conv.is_plan_name(name))]
    best = min(challengers, key=lambda n: medians[n], default=None)
    chosen = recorded
    if best is not None and medians[best] < medians[recorded] * (1 - args.margin):
        chosen = best
    row = {"signature": signature, "recorded": recorded, "chosen": chosen, "medians_s": medians,
           "errors": errors, "flops": FLOPS_PER_MAC * x.shape[0] * (x.shape[2] - 2) * x.shape[3] * x.shape[4]
           * 27 * x.shape[1] * w.shape[0]}
    if chosen != recorded:
        reference = fp32_conv(x, w)
        new, again = runs[chosen](), runs[chosen]()
        row.update(same_bits_twice=torch.equal(new, again), rel_l2_chosen=rel_l2(new, reference),
                   rel_l2_recorded=rel_l2(runs[recorded](), reference))
        del reference
    return row


def describe(row: dict) -> str:
    x = ints(SIGNATURE.match(row["signature"])[1])
    w = ints(SIGNATURE.match(row["signature"])[3])
    medians = row["medians_s"]
    recorded = medians[row["recorded"]]
    best = min((v for n, v in medians.items() if n != row["recorded"]), default=float("nan"))
    switched = "-> " + row["chosen"].split(":", 1)[1] if row["chosen"] != row["recorded"] else "kept"
    checks = ""
    if "same_bits_twice" in row:
        checks = f" bits {row['same_bits_twice']} relL2 {row['rel_l2_chosen']:.3e}/{row['rel_l2_recorded']:.3e}"
    return (f"{x[1]:>4}->{w[0]:<4} {x[2]:>3}x{x[3]}x{x[4]:<5} {row['recorded'][:22]:<22} {recorded * 1e3:8.3f} "
            f"{best * 1e3:8.3f} {recorded / best:6.3f}  {switched}{checks}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--book", required=True, help="the plan book to re-time (a JSON map of signatures to plans)")
    parser.add_argument("--out", required=True, help="where to write the re-timed book")
    parser.add_argument("--report", help="a JSON file of every signature's timings and checks")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds per signature")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--margin", type=float, default=0.02,
                        help="a Triton or CUTLASS plan replaces the recorded one only when faster by more than this "
                             "fraction")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or triton_conv.triton is None:
        print("needs a CUDA device and Triton", file=sys.stderr)
        return 2
    prefer_heuristics_mode_b()  # a recorded `pytorch` plan runs F.conv as the fast path's processes run it
    started = time.perf_counter()
    book = read_book(Path(args.book))
    new_book = dict(book)
    rows = []
    print(f"{'conv':<10} {'frames x H x W':<16} {'recorded plan':<22} {'rec ms':>8} {'best':>8} {'speed':>6}")
    for signature, recorded in sorted(book.items()):
        conv = parse(signature)
        if conv is None:
            continue
        row = retime(signature, recorded, conv, args)
        rows.append(row)
        new_book[signature] = row["chosen"]
        print(describe(row), flush=True)
        torch.cuda.empty_cache()
    before = sum(row["medians_s"][row["recorded"]] for row in rows)
    after = sum(row["medians_s"][row["chosen"]] for row in rows)
    switched = sum(row["chosen"] != row["recorded"] for row in rows)
    print(f"\n{len(rows)} signatures re-timed, {switched} switched; their calls' sum {before * 1e3:.1f} -> "
          f"{after * 1e3:.1f} ms; {time.perf_counter() - started:.0f} s")
    Path(args.out).write_text(json.dumps(dict(sorted(new_book.items())), indent=1) + "\n", encoding="utf-8")
    if args.report:
        Path(args.report).write_text(json.dumps({"device": torch.cuda.get_device_name(), "triton":
                                                 triton_conv.triton.__version__, "cutlass": cutlass_conv.toolchain()
                                                 and cutlass_conv.toolchain().cutlass_version, "margin": args.margin,
                                                 "rounds": args.rounds, "rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
