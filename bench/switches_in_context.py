"""Whether each plan switch between two books pays inside the whole encode, not only alone.

bench/retime_book.py decides a switch by timing one convolution alone; inside the encoder a switch can still lose
(another kernel's cache and clock state around it). This times the Wan2.1 fast path's whole encode of one clip with
the NEW book and, for each signature whose plan differs from the BASE book, with that one signature put back to its
BASE plan, plus the whole BASE choice; the variants interleaved over several rounds (medians), so one noisy moment
favours none. A switch whose revert makes the encode faster by more than the margin is reported as losing in
context, and --write-book writes NEW with those reverted.

    git show be99e67:src/latentforge/tokenizers/conv_plans/NVIDIA-H200_cudnn91900_fe1.32.0.json > base.json
    TORCH_CUDNN_USE_HEURISTIC_MODE_B=1 python bench/switches_in_context.py --base base.json --clips-dir CLIPS \\
        --out switches.json --write-book book.json
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from latentforge.tokenizers.base import pixels_to_input  # noqa: E402
from latentforge.tokenizers.plan_book import read_book  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _random_wan import random_wan_vae  # noqa: E402
from encode import add_clip_arguments, load_clips, tiny_clip  # noqa: E402

SHIPPED = (Path(__file__).resolve().parents[1] / "src" / "latentforge" / "tokenizers" / "conv_plans"
           / "NVIDIA-H200_cudnn91900_fe1.32.0_triton3.6.0.json")
NEW, BASE = "new book", "base choice at every switch"
CONTROL = "new book again (control)"


def short_name(signature: str) -> str:
    """`x[1, 192, 10, 352, 640]:... w[192, 192, 3, 3, 3]:...` -> `192→192 at 352×640, 10 frames`."""
    x = re.match(r"x\[(\d+), (\d+), (\d+), (\d+), (\d+)\]", signature)
    w = re.search(r" w\[(\d+), ", signature)
    if x is None or w is None:
        return signature
    return f"{x[2]}→{w[1]} at {x[4]}×{x[5]}, {x[3]} frames"


def switched(new: dict[str, str], base: dict[str, str]) -> list[str]:
    """The signatures both books hold with different plans."""
    return sorted(s for s in new if s in base and new[s] != base[s])


def variants(new: dict[str, str], base: dict[str, str]) -> dict[str, dict[str, str]]:
    """The NEW book, NEW with each switch reverted alone (named `revert <signature>`), NEW with all reverted, and
    NEW again in a tokenizer of its own (a control)."""
    changes = switched(new, base)
    books = {NEW: dict(new), CONTROL: dict(new)}
    books.update({f"revert {s}": {**new, s: base[s]} for s in changes})
    books[BASE] = {**new, **{s: base[s] for s in changes}}
    return books


def noise_floor(medians: dict[str, float], met: set[str] | None) -> float:
    """Seconds the encode moved with nothing it runs changed: the largest distance from NEW's median of the control
    and of the reverts of switches the clip does not run (`met`; None: unknown, then the control alone)."""
    controls = [CONTROL] + [name for name in medians if name.startswith("revert ") and met is not None
                            and name.removeprefix("revert ") not in met]
    return max(abs(medians[name] - medians[NEW]) for name in controls)


def losing_switches(medians: dict[str, float], margin: float, met: set[str] | None) -> list[str]:
    """The signatures the clip's encode runs (`met`; None: unknown, as on the CPU, which runs no plans) whose
    revert alone made the encode faster than the NEW book by more than `margin` (a fraction of its median) and by
    more than the noise floor."""
    limit = medians[NEW] - max(medians[NEW] * margin, noise_floor(medians, met))
    reverted = {name.removeprefix("revert "): seconds for name, seconds in medians.items()
                if name.startswith("revert ")}
    return sorted(s for s, seconds in reverted.items() if seconds < limit and (met is None or s in met))


def signatures_met(tokenizer_for, video: torch.Tensor) -> set[str] | None:
    """The convolution signatures one encode of `video` runs: what a tokenizer given an empty book records."""
    tokenizer = tokenizer_for({}, "met")
    tokenizer.encode(video)
    return set(tokenizer.recorded_plans()) or None


def tokenizer_factory(args: argparse.Namespace, device: torch.device):
    """A Wan2.1 bf16 tokenizer that takes `book` before its first encode, on one random-weight checkpoint saved
    as a diffusers folder; plans it must tune go to a folder of its own (`name`)."""
    from latentforge.tokenizers.wan21 import Wan21Tokenizer

    checkpoint = Path(args.workdir) / "wan21-random"
    if not checkpoint.is_dir():
        random_wan_vae(base_dim=args.base_dim).save_pretrained(checkpoint)

    def make(book: dict[str, str], name: str):
        tokenizer = Wan21Tokenizer(str(checkpoint), precision="bf16", device=device,
                                   conv_plans_dir=str(Path(args.workdir) / "plans" / name.replace(" ", "_")))
        tokenizer.record_plans(book)
        return tokenizer

    return make


def timed_rounds(encode_by_name: dict, video: torch.Tensor, device: torch.device, rounds: int) -> dict[str, list]:
    """Seconds of each variant's encode per round; each round starts at the next variant (rotation). Every variant
    must have encoded once already (plans tuned, kernels compiled)."""
    names = list(encode_by_name)
    seconds = {name: [] for name in names}
    for round_index in range(rounds):
        for offset in range(len(names)):
            name = names[(round_index + offset) % len(names)]
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
            encode_by_name[name](video)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds[name].append(time.perf_counter() - started)
    return seconds


def run(args: argparse.Namespace, new: dict[str, str], base: dict[str, str]) -> dict:
    books = variants(new, base)
    device = torch.device(args.device)
    make = tokenizer_factory(args, device)
    clip = load_clips(args.clips_dir, 1, args.frames, args.height, args.width)[0]
    video = pixels_to_input(clip, device)[None]
    met = signatures_met(make, video)
    tokenizers = {name: make(book, str(index)) for index, (name, book) in enumerate(books.items())}
    reference = tokenizers[NEW].encode(video)
    same_bits = {name: torch.equal(t.encode(video), t.encode(video)) for name, t in tokenizers.items()}
    rel_l2 = {name: float((t.encode(video) - reference).norm() / reference.norm()) for name, t in tokenizers.items()}
    # the checks above encoded every variant: plans tuned and kernels compiled before the timed rounds
    seconds = timed_rounds({name: t.encode for name, t in tokenizers.items()}, video, device, args.rounds)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    return {"book": str(args.book), "base": str(args.base), "switched": switched(new, base), "rounds": args.rounds,
            "margin": args.margin, "seconds": seconds, "median_s": medians, "same_bits_twice": same_bits,
            "rel_l2_vs_new_book": rel_l2, "met": sorted(met) if met is not None else None,
            "noise_floor_s": noise_floor(medians, met), "losing_in_context": losing_switches(medians, args.margin, met),
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"}


def print_table(result: dict, new: dict[str, str], base: dict[str, str]) -> None:
    medians, reference = result["median_s"], result["median_s"][NEW]
    print(f"\n{len(result['switched'])} switches, {result['rounds']} rounds, medians; Δ = variant − new book "
          f"(negative: reverting is faster)\n")
    met = set(result["met"]) if result["met"] is not None else None
    print("| variant | base plan → new plan | run by this clip | ms | Δ ms | same bits twice | rel-L2 vs new book |")
    print("|---|---|---|---|---|---|---|")
    for name, seconds in medians.items():
        signature = name.removeprefix("revert ")
        reverted = name.startswith("revert ")
        label = f"revert {short_name(signature)}" if reverted else name
        plans = f"{base[signature]} → {new[signature]}" if reverted else ""
        run_here = ("yes" if signature in met else "no") if reverted and met is not None else ""
        print(f"| {label} | {plans} | {run_here} | {seconds * 1e3:.1f} | {(seconds - reference) * 1e3:+.1f} | "
              f"{result['same_bits_twice'][name]} | {result['rel_l2_vs_new_book'][name]:.2e} |")
    losing = result["losing_in_context"]
    print(f"\nnoise floor (the control and the reverts this clip does not run): {result['noise_floor_s'] * 1e3:.1f} ms")
    print(f"losing in context (revert faster by more than {result['margin']:.1%} and the noise floor): {len(losing)}"
          + "".join(f"\n  {short_name(s)}" for s in losing))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_clip_arguments(parser)
    parser.add_argument("--book", type=Path, default=SHIPPED, help="the NEW book (default: the shipped H200 one)")
    parser.add_argument("--base", type=Path, required=True, help="the book the switches are measured against")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--margin", type=float, default=0.002, help="fraction of the encode a revert must save")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/latentforge-switches"))
    parser.add_argument("--out", type=Path, help="write the whole result as JSON")
    parser.add_argument("--write-book", type=Path, help="write NEW with the switches that lose in context reverted")
    parser.add_argument("--tiny", action="store_true", help="the CPU, a width-8 VAE, a 9x16x24 clip (no plans run)")
    args = parser.parse_args(argv)
    if args.tiny:
        tiny_clip(args)
    args.workdir.mkdir(parents=True, exist_ok=True)
    new, base = read_book(args.book), read_book(args.base)
    result = run(args, new, base)
    print_table(result, new, base)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    if args.write_book:
        kept = {**new, **{s: base[s] for s in result["losing_in_context"]}}
        args.write_book.write_text(json.dumps(dict(sorted(kept.items())), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
