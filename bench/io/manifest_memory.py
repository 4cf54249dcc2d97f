"""Peak memory and time of the steps that read or write a whole manifest, against the number of rows: the
commit's manifest step (manifest.jsonl + manifest.parquet), `verify_integrity`, and opening a
`LatentCacheDataset` (its manifest index) and reading a few items.

    python bench/io/manifest_memory.py                        # 1k, 20k and 1M rows (~10 min on 2 cores)
    python bench/io/manifest_memory.py --rows 1000,20000      # only these sizes
    python bench/io/manifest_memory.py --tiny                 # seconds; what the tests run

Every step runs in a fresh interpreter; "peak MB" is its ru_maxrss, "base MB" the high-water mark just before the
step (the interpreter, imports and the step's inputs), so "step MB" = peak - base is what the step itself held.

Two kinds of cache per size:
- manifest-only: N synthetic rows (the rows of `latentforge.dataset.synthetic_cache`, 17 frames each) staged in
  units of 4096 with tiny latents ("stage", setup), then the commit without its shards ("commit_manifest":
  `gather_staged`, rejects, cache_config.json, `manifest_rows`, `write_manifest`, `write_manifest_table`);
  `verify_integrity` on it runs every manifest check (the shard checks fail fast: no shards), and the manifest
  index is read alone ("index"). This is the only kind at 1M rows.
- complete (up to --complete-max rows): `write_synthetic_cache` with the smallest latent (1 channel, 5x1x1, no
  text), i.e. staging + the whole commit (with its verify); then `verify_integrity` and a Dataset open + 8 items.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
FRAMES = 5  # latent frames: 17 pixel frames per row, as the demo's rows


def spec(rows: int, rows_per_shard: int):
    from latentforge.dataset.synthetic_cache import SyntheticCacheSpec
    return SyntheticCacheSpec(num_samples=rows, modalities=("rgb",), channels=1, latent_frames=FRAMES,
                              latent_height=1, latent_width=1, text_name=None, rows_per_shard=rows_per_shard,
                              content="noise")


DEFAULT_UNIT_ROWS = 4096  # rows per staged unit of the manifest-only caches (--unit-rows; a build's default: 256)
UNIT_ROWS = DEFAULT_UNIT_ROWS


def stage(root: Path, rows: int, rows_per_shard: int) -> None:
    """Staged units holding N synthetic rows (tiny latents), as a build leaves them for its commit."""
    import numpy as np

    from latentforge.dataset.synthetic_cache import _Rows
    from latentforge.staging.staged_unit_writer import write_staged_unit
    make = _Rows(spec(rows, rows_per_shard))
    for unit, start in enumerate(range(0, rows, UNIT_ROWS)):
        kept = range(start, min(start + UNIT_ROWS, rows))
        write_staged_unit(root / "build", unit, [make.staged_row(i, unit, (i - start) // 4) for i in kept],
                          np.zeros((len(kept), 1, FRAMES, 1, 1), dtype=np.float16), None, None, [])


def commit_manifest(root: Path, rows: int, rows_per_shard: int) -> None:
    """What the commit does besides the shards: gather the staged rows, then write rejects, config and manifests."""
    from latentforge.cache.rows import write_manifest, write_rejects
    from latentforge.dataset.synthetic_cache import _cache_config, _Rows
    from latentforge.sinks.hdf5.manifest_table import write_manifest_table
    from latentforge.staging.gather import gather_staged, manifest_rows
    config = _cache_config(spec(rows, rows_per_shard))
    make = _Rows(spec(rows, rows_per_shard))
    units = sorted((root / "build").rglob("unit-*.h5"))
    planned = {unit: [make.source_index(i) for i in range(start, min(start + UNIT_ROWS, rows))]
               for unit, start in enumerate(range(0, rows, UNIT_ROWS))}
    placed, rejects, _ = gather_staged(config.shard_schema(), units, planned)
    shards = config.shard_schema().shard_paths(len(placed))
    write_rejects(root, rejects)
    config.committed(len(placed), len(shards), None, rows, 0).write(root)
    manifest = manifest_rows(placed, shards)
    write_manifest(root, manifest)
    write_manifest_table(root, manifest)


def child(step: str, root: Path, rows: int, rows_per_shard: int) -> dict:
    """One step in this (fresh) interpreter; its time and memory."""
    from latentforge.sinks.hdf5.integrity import verify_integrity
    from latentforge.sinks.hdf5.manifest_index import read_manifest_index

    if step in ("stage", "commit_manifest", "commit", "dataset"):  # these import torch: in their base, not step
        import latentforge.staging.gather  # noqa: F401
        from latentforge.dataset import LatentCacheDataset
        from latentforge.dataset.synthetic_cache import write_synthetic_cache
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    if step == "stage":
        stage(root, rows, rows_per_shard)
    elif step == "commit_manifest":
        commit_manifest(root, rows, rows_per_shard)
    elif step == "commit":
        write_synthetic_cache(root, spec(rows, rows_per_shard))
    elif step in ("verify", "verify_manifest"):
        report = verify_integrity(root, require_complete=False)
        if step == "verify" and not report.ok:
            raise RuntimeError(f"verify failed: {report.failures[:3]}")
    elif step == "index":
        read_manifest_index(root, rows)
    elif step == "dataset":
        dataset = LatentCacheDataset(root)
        for i in range(0, len(dataset), max(1, len(dataset) // 8)):
            dataset[i]
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": round(seconds, 3), "base_mb": round(base, 1), "peak_mb": round(peak, 1),
            "step_mb": round(peak - base, 1)}


def run_step(step: str, root: Path, rows: int, rows_per_shard: int) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, __file__, "--child", step, "--root", str(root), "--rows-one", str(rows),
                           "--rows-per-shard", str(rows_per_shard), "--unit-rows", str(UNIT_ROWS)],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{step} at {rows} rows failed:\n{done.stderr[-3000:]}")
    return {"step": step, "rows": rows, **json.loads(done.stdout.strip().splitlines()[-1])}


def machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    import pyarrow
    return {"cpu": cpu, "cores": str(os.cpu_count()), "python": platform.python_version(),
            "pyarrow": pyarrow.__version__, "kernel": platform.release()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1000,20000,1000000", help="manifest sizes, comma-separated")
    parser.add_argument("--complete-max", type=int, default=20000, help="largest size also built as a whole cache")
    parser.add_argument("--tiny", action="store_true", help="300 rows: seconds on CPU")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--unit-rows", type=int, default=DEFAULT_UNIT_ROWS,
                        help="rows per staged unit of the manifest-only caches (the commit holds two units' rows)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--rows-one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rows-per-shard", type=int, default=3000, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global UNIT_ROWS
    UNIT_ROWS = args.unit_rows
    if args.child:
        print(json.dumps(child(args.child, Path(args.root), args.rows_one, args.rows_per_shard)))
        return {}
    sizes = [300] if args.tiny else [int(n) for n in args.rows.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="manifest-memory-") as tmp:
        for rows in sizes:
            per_shard = 3000 if rows <= 100_000 else 250_000  # few large shards at a million rows
            only = Path(tmp) / f"manifest-{rows}"
            for step in ("stage", "commit_manifest", "verify_manifest", "index"):
                results.append(run_step(step, only, rows, per_shard))
                print(results[-1], flush=True)
            if rows <= args.complete_max:
                whole = Path(tmp) / f"cache-{rows}"
                for step in ("commit", "verify", "dataset"):
                    results.append(run_step(step, whole, rows, 100 if args.tiny else per_shard))
                    print(results[-1], flush=True)
            manifest = only / "manifest.jsonl"
            for r in results:
                if r["rows"] == rows:
                    r["manifest_bytes_per_row"] = round(manifest.stat().st_size / rows)
    print(f"\n{'step':16} {'rows':>9} {'seconds':>9} {'base MB':>9} {'peak MB':>9} {'step MB':>9}")
    for r in results:
        print(f"{r['step']:16} {r['rows']:>9} {r['seconds']:>9.2f} {r['base_mb']:>9.1f} {r['peak_mb']:>9.1f} "
              f"{r['step_mb']:>9.1f}")
    out = {"machine": machine(), "tiny": args.tiny, "results": results}
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
