"""The probe's cost per clip: decoding every frame from the start (latentforge's probe, which numbers the pictures the
decoder shows) against demuxing every packet without decoding (what a probe that trusted the packets cost).

    python bench/io/probe.py                      # a synthetic 10 s 1280x720 x264 (preset medium) clip, 3 repeats
    python bench/io/probe.py --clips-dir CLIPS    # every .mp4 in a folder instead
    python bench/io/probe.py --tiny               # a 64x48 clip, seconds; what the tests run

CPU seconds are the process's (FFmpeg's decoding threads included); each row is the fastest of the repeats. The
per-file cache is cleared before each repeat, so every repeat decodes.
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
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from latentforge.decode import stream_probe  # noqa: E402


def synthetic_clip(path: Path, width: int, height: int, frames: int, preset: str) -> Path:
    """Moving gradients and a moving block (60 distinct pictures, repeated), H.264 at 30 fps."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    pictures = []
    for t in range(min(frames, 60)):
        rgb = np.stack([128 + 100 * np.sin(x / 37 + t * 0.3), 128 + 100 * np.cos(y / 23 - t * 0.2),
                        (x + 2 * y + 9 * t) % 256], -1)
        rgb[(t * 7) % (height // 2):(t * 7) % (height // 2) + height // 4, :: max(1, width // 16)] = 255
        pictures.append(np.clip(rgb, 0, 255).astype(np.uint8))
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": preset, "crf": "23"}
        for k in range(frames):
            for packet in stream.encode(av.VideoFrame.from_ndarray(pictures[k % len(pictures)], format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def demux_only(path: Path) -> int:
    """Every packet's timestamp, nothing decoded."""
    with av.open(str(path)) as container:
        return sum(1 for packet in container.demux(video=0) if packet.size)


def probe(path: Path) -> int:
    stream_probe._probe_once.cache_clear()
    return stream_probe.probe_video(str(path), path.stem).num_frames


def timed(function, path: Path, repeats: int) -> tuple[int, float, float]:
    """(frames, wall s, CPU s) of the fastest repeat by CPU."""
    best = None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        frames = function(path)
        result = (frames, time.perf_counter() - wall, time.process_time() - cpu)
        best = result if best is None or result[2] < best[2] else best
    return best


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips-dir", type=Path, help="folder of .mp4 clips (else one synthetic clip)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="a 64x48 clip of 24 frames, one repeat")
    parser.add_argument("--out", type=Path, help="also write the rows here as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        if args.clips_dir:
            clips = sorted(args.clips_dir.glob("*.mp4"))
        elif args.tiny:
            clips = [synthetic_clip(Path(scratch) / "tiny.mp4", 64, 48, 24, "veryfast")]
        else:
            clips = [synthetic_clip(Path(scratch) / "synthetic-720p-10s.mp4", 1280, 720, 300, "medium")]
        repeats = 1 if args.tiny else args.repeats
        rows = []
        for clip in clips:
            frames, demux_wall, demux_cpu = timed(demux_only, clip, repeats)
            shown, probe_wall, probe_cpu = timed(probe, clip, repeats)
            rows.append({"clip": clip.name, "packets": frames, "frames": shown, "demux_cpu_s": demux_cpu,
                         "demux_wall_s": demux_wall, "probe_cpu_s": probe_cpu, "probe_wall_s": probe_wall})
    machine = f"host cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; PyAV {av.__version__}"
    print(machine)
    print("| clip | packets | frames shown | demux only, CPU s | probe, CPU s | probe, wall s | probe / demux (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["probe_cpu_s"] / max(r["demux_cpu_s"], 1e-9)
        print(f"| {r['clip']} | {r['packets']} | {r['frames']} | {r['demux_cpu_s']:.3f} | {r['probe_cpu_s']:.3f} | "
              f"{r['probe_wall_s']:.3f} | {ratio:.0f}x |")
    result = {"machine": machine, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
