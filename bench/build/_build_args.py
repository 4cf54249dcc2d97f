"""The command line of bench/build/build.py: its phases and groups, its options, and the --tiny settings that run
every phase on the CPU in seconds."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

PHASES = ("cpu", "pure", "t5", "perception", "rgb", "rgb_device", "long", "i2v", "scaling", "sha")
GROUPS = {"throughput": ("cpu", "pure", "t5", "perception", "rgb", "rgb_device"),
          "scaling": ("perception", "scaling", "sha"),
          "all": tuple(p for p in PHASES if p != "i2v")}  # i2v needs the Wan VAE: named on its own, on a GPU
# gen_procs=1: two tiny clips render in milliseconds, a spawned pool of renderers takes seconds to start
TINY = dict(clips=2, rows=8, src_size="96x64", src_frames=20, frames=9, size="48x64", batch=2, unit_size=2,
            workers_per_gpu=0, warmup=0.0, duration=60.0, scale_duration=60.0, gpus_list=[1, 2], cpu_reps=1,
            gen_procs=1, pure_batches=1, text="tiny", tick=0.2, phases="all", max_rate=100.0,
            long_videos=1, long_seconds=4.0, long_shot_seconds=1.0, long_stride=8)


def size_pair(text: str) -> tuple[int, int]:
    """"AxB" (a --size or --src-size) as (A, B)."""
    a, b = (int(v) for v in text.split("x"))
    return a, b


def tiny_defaults(args: argparse.Namespace, argv: list[str] | None, values: dict) -> None:
    """--tiny: `values` for every option the command line did not name itself."""
    explicit = {a.split("=")[0].lstrip("-").replace("-", "_") for a in (argv or sys.argv[1:]) if a.startswith("--")}
    for key, value in values.items():
        if key not in explicit:
            setattr(args, key, value)


def parse_args(argv: list[str] | None, description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--tiny", action="store_true", help="CPU, haar-4x8x8, tiny T5, 2 clips, 1 vs 2 procs")
    p.add_argument("--out", type=Path, default=Path("bench-build-out"), help="JSON results and logs go here")
    p.add_argument("--workdir", type=Path, help="dataset, models and caches (default OUT/work)")
    p.add_argument("--phases", default=None, help=f"comma list of {', '.join(PHASES)} or {', '.join(GROUPS)}; "
                   "default: throughput, or scaling when --gpus-list is given")
    p.add_argument("--device", default=None, help="cuda or cpu (default cuda when available)")
    p.add_argument("--clips", type=int, default=16, help="distinct clips rendered")
    p.add_argument("--rows", type=int, default=None, help="table rows (default: enough for every build)")
    p.add_argument("--src-size", default="1280x720", help="source WxH")
    p.add_argument("--src-frames", type=int, default=96)
    p.add_argument("--caption-dup", type=float, default=0.25, help="fraction of rows repeating a caption")
    p.add_argument("--gen-procs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--text", choices=("t5-11b", "tiny"), default=None, help="default t5-11b on cuda, else tiny")
    p.add_argument("--frames", type=int, default=93)
    p.add_argument("--size", default="480x832", help="output HxW")
    p.add_argument("--batch", type=int, default=1, help="samples per tokenizer call (the preset's 1)")
    p.add_argument("--unit-size", type=int, default=8)
    p.add_argument("--workers-per-gpu", default="auto", help="auto (from the cores) or N")
    p.add_argument("--warmup", type=float, default=45.0, help="seconds from build start excluded (issue: 60)")
    p.add_argument("--duration", type=float, default=120.0, help="steady seconds of each 1-GPU build")
    p.add_argument("--scale-duration", type=float, default=180.0, help="steady seconds of each N-GPU build")
    p.add_argument("--gpus-list", type=int, nargs="+", default=None, help="e.g. 1 2 (cpu: procs)")
    p.add_argument("--max-rate", type=float, default=1.0,
                   help="upper guess of perception samples/s per GPU, sizes each build's --limit")
    p.add_argument("--device-resize-decoder", choices=("nvdec", "cpu"), default="nvdec",
                   help="frames.decoder of the rgb_device build on a GPU")
    p.add_argument("--i2v-precision", choices=("fp32", "bf16"), default="bf16",
                   help="conditioning.precision of the i2v build")
    p.add_argument("--long-videos", type=int, default=24, help="long videos of the long phase")
    p.add_argument("--long-seconds", type=float, default=60.0, help="length of each long video (30 fps)")
    p.add_argument("--long-shot-seconds", type=float, default=8.0, help="shot length in the long videos")
    p.add_argument("--long-stride", type=int, default=48, help="frames.windows=every N of the long phase")
    p.add_argument("--cpu-reps", type=int, default=3)
    p.add_argument("--pure-batches", type=int, default=2, help="timed batches after one untimed")
    p.add_argument("--tick", type=float, default=2.0, help="seconds between RSS/CPU/unit samples")
    args = p.parse_args(argv)
    if args.tiny:
        tiny_defaults(args, argv, TINY)
        args.device = args.device or "cpu"
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.text = args.text or ("t5-11b" if args.device.startswith("cuda") else "tiny")
    args.gpus_list = sorted(set(args.gpus_list or [1]))
    phases = args.phases or ("scaling" if len(args.gpus_list) > 1 else "throughput")
    chosen: list[str] = []
    for name in phases.split(","):
        for phase in GROUPS.get(name.strip(), (name.strip(),)):
            if phase not in PHASES:
                p.error(f"unknown phase {phase!r}; allowed: {', '.join(PHASES)}, {', '.join(GROUPS)}")
            chosen.append(phase)
    args.phase_list = [ph for ph in PHASES if ph in chosen]
    if args.tiny and "i2v" in args.phase_list:
        p.error("--phases i2v needs the Wan VAE; --tiny builds with haar-4x8x8 (run it on a GPU without --tiny)")
    args.workdir = args.workdir or args.out / "work"
    return args
