"""Memory the build's main process holds per planned sample: the plan (one Sample per window) and the probe's results
(one ProbeResult per window: the video's frame times, the window's frames and times, the resize), which the build
keeps from the probe until its commit. Two inputs of real H.264 clips:
- short: many 5 s clips at 30 fps, one 93-frame window each (a table of cut clips);
- long: one long video, a 93-frame window every 16 frames (raw video cut by `frames.windows: every 16`).

    python bench/io/plan_memory.py                 # 300 short clips, one 10-minute video (~2 minutes on 2 cores)
    python bench/io/plan_memory.py --tiny          # seconds; what the tests run

Bytes are Python's own allocations (tracemalloc) in the process that plans and gathers the probe, as the build does:
the short clips are probed by a pool of processes (results pickled back per video, as a build's), the long video in
the main process. "record" is the probe record read back by a rerun (build/probe.pkl). "1M samples" is B/sample x
10^6: what the main process would hold for a million windows of that kind.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import platform
import sys
import tracemalloc
from pathlib import Path

import av
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

SIZE = (48, 32)  # the frame size does not change what is held: only the frame count does


def write_clip(path: Path, frames: int, seed: int) -> None:
    """A `frames`-frame 30 fps H.264 clip of moving noise."""
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (SIZE[1], SIZE[0], 3), dtype=np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "40"}
        for k in range(frames):
            frame = av.VideoFrame.from_ndarray(np.roll(pixels, k, axis=1), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode())


def write_table(folder: Path, clips: list[tuple[str, int]]) -> Path:
    """folder/table.csv listing `clips` ((id, frames)), each rendered as folder/videos/<id>.mp4."""
    for seed, (clip_id, frames) in enumerate(clips):
        write_clip(folder / "videos" / f"{clip_id}.mp4", frames, seed)
    table = folder / "table.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "video", "caption"])
        writer.writerows((clip_id, f"videos/{clip_id}.mp4", f"clip {clip_id}") for clip_id, _ in clips)
    return table


def held(step) -> tuple[object, int]:
    """What `step()` returns and the bytes of Python allocations still held once it returned."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    value = step()
    gc.collect()
    return value, tracemalloc.get_traced_memory()[0] - before


def measure(table: Path, window: str, work: Path) -> dict[str, float]:
    import pickle

    from latentforge.config.loading import load_config
    from latentforge.executor.parallel_probe import probe_plan
    from latentforge.pipeline.plan import plan_samples

    config = load_config(None, overrides=[
        "dataset.reader=table", f"dataset.path=[{table}]", "dataset.id_column=id", "tokenizer.name=haar-4x8x8",
        "text.name=none", "frames.num_frames=93", f"frames.height={SIZE[1]}", f"frames.width={SIZE[0]}",
        f"frames.windows={window}", "run.probe_workers=2", f"output.root={work / 'cache'}"])
    warm, _ = plan_samples(config)
    probe_plan(warm[:2], config)  # the modules a probe imports on first use are not what it holds per sample
    del warm
    tracemalloc.start()
    try:
        (samples, _), plan_bytes = held(lambda: plan_samples(config))
        probes, probe_bytes = held(lambda: probe_plan(samples, config))
        record = pickle.dumps(probes, protocol=5)
        del probes
        _, record_bytes = held(lambda: pickle.loads(record))
    finally:
        tracemalloc.stop()
    n = len(samples)
    return {"samples": n, "plan_B": plan_bytes / n, "probe_B": probe_bytes / n, "record_B": record_bytes / n,
            "pickled_B": len(record) / n}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("plan-memory-work"), help="folder for the clips")
    parser.add_argument("--clips", type=int, default=300, help="short clips (5 s each)")
    parser.add_argument("--long-minutes", type=float, default=10.0, help="length of the long video")
    parser.add_argument("--tiny", action="store_true", help="4 short clips, a 12 s long video (the tests)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    clips, minutes = (4, 0.2) if args.tiny else (args.clips, args.long_minutes)
    short = write_table(args.work / "short", [(f"c{i:05d}", 150) for i in range(clips)])
    long = write_table(args.work / "long", [("long", int(minutes * 60 * 30))])
    rows = {"short": measure(short, "one", args.work / "short"),
            "long": measure(long, "every 16", args.work / "long")}
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; 93-frame windows")
    print("| input | samples | plan B/sample | probe B/sample | record read B/sample | plan + probe, 1M samples |")
    print("|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['samples']} | {row['plan_B']:.0f} | {row['probe_B']:.0f} | {row['record_B']:.0f} | "
              f"{(row['plan_B'] + row['probe_B']) * 1e6 / 2**30:.1f} GiB |")
    report = {"clips": clips, "long_minutes": minutes, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
