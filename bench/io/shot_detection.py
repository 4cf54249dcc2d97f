"""Shot detection's analysis pass (decode/shot_analysis.py): seconds of video analysed per CPU core-second, at 480p
and 1080p sources, with the analysis resolution it ran at (docs/long-videos.md), for PySceneDetect's `content` and
`adaptive` detectors and for TransNetV2 (on the CPU, as the analysis runs it).

    python bench/io/shot_detection.py                 # synthetic 8 s clips at 854x480 and 1920x1080, 30 fps
    python bench/io/shot_detection.py --seconds 20    # longer clips
    python bench/io/shot_detection.py --tiny          # a 64x48 clip of 2 s, seconds; what the tests run

The clips are written here with x264 (preset veryfast, crf 23): shots of a panning pattern with a moving block, a
hard cut every 2 s and a 12-frame dissolve. CPU seconds are the process's, FFmpeg's decoding threads included, so
"x real time per core" is video seconds / CPU seconds whatever the thread count; each row is the fastest of the
repeats. The target is 20x real time per core at 480p.

TransNetV2 runs with seeded random weights (its real ones cannot be downloaded here): its speed does not depend on
the values, but the cuts it finds do, so its rows say "random weights" where the others list the cuts. Its weights
are loaded once per process, in the first repeat; torch's CPU threads count in its CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import av

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_common"))

from _long_videos import FPS, synthetic_clip  # noqa: E402

from latentforge.decode.shot_analysis import AnalysisSettings, analyse_video  # noqa: E402

WEIGHTS_SEED = 0


def seeded_transnetv2_weights(folder: Path) -> tuple[str, str]:
    """TransNetV2's state dict as torch initialises it under a fixed seed, saved as a state dict: (path, SHA-256)."""
    import torch

    from latentforge.decode.transnetv2_model import TransNetV2
    from latentforge.decode.transnetv2_weights import weights_sha256

    torch.manual_seed(WEIGHTS_SEED)
    path = folder / "transnetv2-seeded.pth"
    torch.save(TransNetV2().state_dict(), path)
    return str(path), weights_sha256(str(path))


def timed(path: Path, settings: AnalysisSettings, repeats: int):
    best = None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        analysis = analyse_video(str(path), path.stem, settings)
        result = (analysis, time.perf_counter() - wall, time.process_time() - cpu)
        best = result if best is None or result[2] < best[2] else best
    return best


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each synthetic clip")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--analysis-width", type=int, default=AnalysisSettings().analysis_width)
    parser.add_argument("--detectors", default="content,adaptive,transnetv2")
    parser.add_argument("--tiny", action="store_true", help="one 64x48 clip of 2 s, one repeat")
    parser.add_argument("--out", type=Path, help="also write the rows here as JSON")
    args = parser.parse_args(argv)
    sources = [("tiny", 64, 48)] if args.tiny else [("480p", 854, 480), ("1080p", 1920, 1080)]
    seconds = 2.0 if args.tiny else args.seconds
    repeats = 1 if args.tiny else args.repeats
    rows = []
    detectors = args.detectors.split(",")
    with tempfile.TemporaryDirectory() as scratch:
        weights, sha256 = seeded_transnetv2_weights(Path(scratch)) if "transnetv2" in detectors else (None, None)
        for label, width, height in sources:
            clip, frames = synthetic_clip(Path(scratch) / f"{label}.mp4", width, height, seconds)
            for detect in ["none", *detectors]:
                settings = AnalysisSettings(detect=detect, analysis_width=args.analysis_width,
                                            transnetv2_weights=weights, transnetv2_sha256=sha256)
                analysis, wall, cpu = timed(clip, settings, repeats)
                video_s = frames / FPS
                found = [t.frame for t in analysis.transitions]
                rows.append({"source": f"{label} {width}x{height}", "detector": detect,
                             "analysis_size": "x".join(map(str, analysis.analysis_size)), "frames": frames,
                             "video_s": video_s, "cpu_s": cpu, "wall_s": wall,
                             "realtime_per_core": video_s / max(cpu, 1e-9),
                             # seeded random weights: what TransNetV2 finds says nothing of its accuracy
                             "cuts": None if detect == "transnetv2" else found})
    machine = (f"host cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; PyAV {av.__version__}"
               f"; source clips x264 veryfast at {FPS} fps")
    print(machine)
    print("| source | detector | analysed at | video s | CPU s | wall s | x real time per core | cuts found |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['source']} | {r['detector']} | {r['analysis_size']} | {r['video_s']:.1f} | {r['cpu_s']:.2f} | "
              f"{r['wall_s']:.2f} | {r['realtime_per_core']:.1f} | "
              f"{'random weights' if r['cuts'] is None else r['cuts']} |")
    result = {"machine": machine, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
