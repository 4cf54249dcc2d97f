"""Captioning in the build: captions/s and generated tokens/s of the qwen2.5-vl captioner at several batch sizes, and
the whole build's rate with captions generated against the same build keeping the listing's captions.

The captioner is the Qwen2.5-VL-7B-Instruct architecture with random bf16 weights (bench/_common/_random_qwen_vl.py),
made to write captions of exactly --caption-tokens tokens; it is loaded through the build's own route
(QwenVLCaptioner.load from a folder). Each window is --frames frames of a rendered clip at --resolution (the short
side), as the build hands them over. The builds: the RGB Wan2.1 build (random weights, bf16) of --rows rows of
rendered clips, run to the end, once with captions.mode=keep and once with captions.mode=generate_all at
--build-batch; whole-command wall time and the caption pass' own seconds (from the build's stats).

    python bench/build/captions.py --work /tmp/captions --out captions.json    # GPU machine
    python bench/build/captions.py --tiny --out captions.json                  # CPU, seconds (a test)
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_common"))

import _build_data as data  # noqa: E402
import _build_run as runner  # noqa: E402
from _build_args import size_pair, tiny_defaults  # noqa: E402
from _random_qwen_vl import make_random_qwen_vl  # noqa: E402
from _rgb_build import rgb_build_config, write_config  # noqa: E402

TINY = dict(clips=2, rows=4, src_size="96x64", src_frames=12, frames_out=9, size="48x64", caption_tokens=8,
            resolution=56, batches=[1, 2], build_batch=2, reps=1, frames=2, text="tiny")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="CPU: the architecture shrunk, haar tokenizer, 4 rows")
    p.add_argument("--out", type=Path, default=Path("captions-bench.json"), help="the results as JSON")
    p.add_argument("--work", type=Path, default=None, help="data, models, caches and logs (default: beside --out)")
    p.add_argument("--clips", type=int, default=8)
    p.add_argument("--rows", type=int, default=64, help="rows of each build")
    p.add_argument("--src-size", default="854x480", help="source WxH")
    p.add_argument("--src-frames", type=int, default=96)
    p.add_argument("--frames-out", type=int, default=93, help="frames of each window (frames.num_frames)")
    p.add_argument("--size", default="480x832", help="output HxW")
    p.add_argument("--frames", type=int, default=8, help="captions.frames")
    p.add_argument("--resolution", type=int, default=448, help="captions.resolution")
    p.add_argument("--caption-tokens", type=int, default=96, help="tokens of every generated caption")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8, 16], help="generate batch sizes timed")
    p.add_argument("--build-batch", type=int, default=8, help="captions.batch_size of the build")
    p.add_argument("--reps", type=int, default=2, help="timed generate calls per batch size, after one untimed")
    p.add_argument("--text", choices=("t5-11b", "tiny"), default="tiny")
    p.add_argument("--no-builds", action="store_true", help="time the captioner only")
    args = p.parse_args(argv)
    if args.tiny:
        tiny_defaults(args, argv, TINY)
    import torch

    args.device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    args.work = args.work or args.out.parent / f"{args.out.stem}-work"
    return args


def windows_of(table: Path, args) -> list[np.ndarray]:
    """Each clip's --frames frames spread over its first window, the short side at --resolution (uint8 RGB)."""
    import av
    from PIL import Image

    with open(table, newline="", encoding="utf-8") as handle:
        videos = sorted({row["video"] for row in csv.DictReader(handle)})
    picks = np.linspace(0, args.frames_out - 1, args.frames).round().astype(int)
    windows = []
    for video in videos:
        with av.open(str(table.parent / video)) as container:
            frames = [f.to_ndarray(format="rgb24") for i, f in enumerate(container.decode(video=0)) if i in picks]
        h, w = frames[0].shape[:2]
        scale = args.resolution / min(h, w)
        size = (round(w * scale), round(h * scale))
        windows.append(np.stack([np.asarray(Image.fromarray(f).resize(size, Image.BICUBIC)) for f in frames]))
    return windows


def time_generate(folder: Path, windows: list[np.ndarray], args) -> list[dict[str, Any]]:
    import torch

    from latentforge.captions.qwen_vl import QwenVLCaptioner
    from latentforge.captions.templates import resolve_prompt
    from latentforge.config import CaptionsConfig

    started = time.time()
    captioner = QwenVLCaptioner.load(CaptionsConfig(mode="generate_all", model=str(folder)), args.device)
    load_s = time.time() - started
    prompt = resolve_prompt("detailed").text
    budget = args.caption_tokens + 32
    rows = []
    for batch in args.batches:
        chosen = [windows[i % len(windows)] for i in range(batch)]
        captioner.generate(chosen, prompt, budget)  # untimed: kernels chosen, caches allocated
        if args.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        seconds = []
        for _ in range(args.reps):
            started = time.perf_counter()
            answers = captioner.generate(chosen, prompt, budget)
            if args.device == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - started)
        words = [len(a.text.split()) for a in answers]
        if not all(a.ended for a in answers) or set(words) != {args.caption_tokens}:
            raise RuntimeError(f"captions of batch {batch} were not {args.caption_tokens} tokens: {words}")
        best = min(seconds)
        rows.append({"batch": batch, "seconds": best, "captions_per_s": batch / best,
                     "tokens_per_s": batch * args.caption_tokens / best, "load_s": load_s,
                     "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if args.device == "cuda" else None})
        print("generate", json.dumps(rows[-1]), flush=True)  # each row as it comes: a run cut short keeps them
    del captioner
    return rows


def timed_build(name: str, config: dict[str, Any], args) -> dict[str, Any]:
    path = write_config(args.work, name, config)
    root = Path(config["output"]["root"])
    run = runner.run_build(name, path, root, 1, 8, args.rows, None, 1.0, args.work / "logs" / f"{name}.log")
    if run.exit_code != 0:
        raise RuntimeError(f"build {name} exited {run.exit_code}:\n{run.output_tail}")
    stats = run.stats or {}
    wall = run.ended_unix - run.started_unix
    encoded = stats.get("samples_encoded_this_run") or 0
    return {"wall_s": wall, "samples": encoded, "samples_per_s": encoded / wall if wall else None,
            "stage_seconds": stats.get("stage_seconds", {}), "rejects": stats.get("rejects_by_reason")}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.work
    width, height = size_pair(args.src_size)
    started = time.time()
    spec = data.DatasetSpec(args.clips, args.rows, width, height, args.src_frames)
    table = data.make_dataset(work / "dataset", spec, 1 if args.tiny else min(args.clips, os.cpu_count() or 1))
    vae = None if args.tiny else data.make_wan21_vae(work / "models" / "wan21-random")
    text = data.make_text_model(work / "models" / args.text, sorted(set(data.table_captions(table))) + ["scene"],
                                args.device, args.text == "t5-11b")
    vlm = make_random_qwen_vl(work / "models" / "qwen2.5-vl", args.caption_tokens, args.tiny, args.device)
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "prepare_s": time.time() - started}
    results["generate"] = time_generate(vlm, windows_of(table, args), args)
    captions = {"mode": "generate_all", "model": str(vlm), "frames": args.frames, "resolution": args.resolution,
                "max_new_tokens": args.caption_tokens + 32, "batch_size": args.build_batch}
    results["builds"] = {}
    for name, section in () if args.no_builds else (("keep", None), ("generate_all", captions)):
        config = rgb_build_config(args.size, args.frames_out, args.device, table, vae, text, work / "caches" / name,
                                  8, {"captions": section} if section else {})
        results["builds"][name] = timed_build(name, config, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=str))
    print_table(results)
    return 0


def print_table(results: dict[str, Any]) -> None:
    print("\ncaptioner (qwen2.5-vl, random weights of the 7B architecture unless --tiny)")
    print(f"{'batch':>5} {'s/call':>8} {'captions/s':>10} {'tokens/s':>9} {'GPU GiB':>8}")
    for row in results["generate"]:
        peak = f"{row['peak_gib']:.1f}" if row["peak_gib"] is not None else "-"
        print(f"{row['batch']:>5} {row['seconds']:8.3f} {row['captions_per_s']:10.3f} {row['tokens_per_s']:9.1f} "
              f"{peak:>8}")
    if not results["builds"]:
        return
    print(f"\n{'build':<13} {'samples':>7} {'wall s':>7} {'samples/s':>9} {'captions s':>10}")
    for name, row in results["builds"].items():
        print(f"{name:<13} {row['samples']:>7} {row['wall_s']:7.1f} {row['samples_per_s'] or 0:9.3f} "
              f"{row['stage_seconds'].get('captions', 0):10.1f}")


if __name__ == "__main__":
    sys.exit(main())
