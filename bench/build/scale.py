"""How a cache's commands grow with the cache: a fresh build of N tiny distinct clips, the same build again with
nothing to do, `--extend` with 10 % more rows, and `verify`, each a `latentforge` process of its own (the haar
tokenizer, no text model: the cost is the pipeline's, not a model's). Prints wall time and the peak RSS of the
largest process of each command, per N, and the extend's cost per existing row.

    python bench/build/scale.py --sizes 1000 5000 20000 --work /tmp/scale --out scale.json
    python bench/build/scale.py --tiny --out scale.json    # 20 clips, for the tests

`--src FOLDER` runs another checkout's package (its src/) on the same clips, for a side-by-side comparison.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np

REPO = Path(__file__).resolve().parents[2]
SIZE = (48, 32)
FRAMES = 9


def write_clips(folder: Path, first: int, count: int) -> list[dict[str, str]]:
    """`count` distinct 9-frame 48x32 H.264 clips numbered from `first` (each its own noise seed)."""
    (folder / "videos").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(first, first + count):
        name = f"videos/clip{i:06d}.mp4"
        if not (folder / name).is_file():
            pixels = np.random.default_rng(i).integers(0, 256, (FRAMES, SIZE[1], SIZE[0], 3), dtype=np.uint8)
            with av.open(str(folder / name), "w") as container:
                stream = container.add_stream("libx264", rate=16)
                stream.width, stream.height, stream.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
                stream.options = {"preset": "ultrafast", "crf": "30"}
                for frame in pixels:
                    container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
                container.mux(stream.encode())
        rows.append({"id": f"clip{i:06d}", "video": name, "caption": f"clip number {i}"})
    return rows


def write_table(path: Path, rows: list[dict[str, str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "video", "caption"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def timed(args: list[str], src: Path) -> dict[str, float]:
    """Wall seconds and the peak RSS (MB) of the largest process of `latentforge ARGS`, the package from `src`."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])))
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "latentforge.cli.main", *args], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"latentforge {' '.join(args)} failed: {process.stderr.read().decode()[-2000:]}")
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def measure(work: Path, n: int, src: Path) -> dict[str, dict[str, float]]:
    data, root = work / "data", work / f"cache-{n}-{src.parent.name}"  # one cache per checkout
    base = write_table(data / f"base-{n}.csv", write_clips(data, 0, n))
    grown = write_table(data / f"grown-{n}.csv", write_clips(data, 0, n + max(1, n // 10)))
    common = ["--reader", "table", "--tokenizer", "haar-4x8x8", "--text", "none", "--device", "cpu", "--quiet",
              "--out", str(root), "--set", f"frames.num_frames={FRAMES}", "--set", f"frames.height={SIZE[1]}",
              "--set", f"frames.width={SIZE[0]}", "--set", "output.min_free_bytes=0", "--set", "dataset.id_column=id"]
    result = {"build": timed(["build", "--dataset", str(base), "--overwrite", *common], src),
              "rerun": timed(["build", "--dataset", str(base), *common], src),
              "extend": timed(["build", "--dataset", str(grown), "--extend", *common], src),
              "verify": timed(["verify", str(root)], src)}
    result["extend"]["ms_per_existing_row"] = round(1000 * result["extend"]["seconds"] / n, 3)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--work", type=Path, default=Path("scale-work"), help="folder for the clips and caches")
    parser.add_argument("--tiny", action="store_true", help="20 clips (the tests)")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the package's source folder to run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    sizes = [20] if args.tiny else args.sizes
    runs = {str(n): measure(args.work, n, args.src.resolve()) for n in sizes}
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, package {args.src}")
    print("| step | " + " | ".join(f"N = {n:,}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for step in ("build", "rerun", "extend", "verify"):
        cells = [f"{runs[str(n)][step]['seconds']} s, {runs[str(n)][step]['peak_rss_mb']:.0f} MB" for n in sizes]
        print(f"| {step} | " + " | ".join(cells) + " |")
    print("| extend, per existing row | " + " | ".join(f"{runs[str(n)]['extend']['ms_per_existing_row']} ms"
                                                     for n in sizes) + " |")
    report = {"cores": os.cpu_count(), "sizes": sizes, "runs": runs}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
