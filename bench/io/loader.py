"""Loader throughput: LatentCacheDataset through a DataLoader vs a raw sequential read of the same files, and
StreamingLatentDataset over the same samples as WebDataset tars, read locally and from a moto S3 server on
loopback (vs raw reads of the same tar objects).

    python bench/io/loader.py                      # ~15.4 MB samples (perception preset), 64 samples, 0/2/4 workers
    python bench/io/loader.py --sample-mb 4 --samples 200 --workers 0,1,2
    python bench/io/loader.py --tiny               # seconds on CPU; what the tests run
    python bench/io/loader.py --no-s3              # without the moto S3 rows (moto[server] not installed)

Cold runs start after the files' pages are dropped with posix_fadvise(POSIX_FADV_DONTNEED) (after fsync, so
no page is dirty); the drop is checked by timing a probe read cold and warm. Warm runs follow a full read.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import h5py
import torch
from torch.utils.data import DataLoader

from latentforge.cache.config_file import CacheConfig
from latentforge.cache.layout import EMPTY_PROMPT, RUN_RECORDS_DIR
from latentforge.dataset import (
    LatentCacheDataset,
    ResumableSampler,
    StreamingLatentDataset,
    SyntheticCacheSpec,
    collate_latent_batch,
)
from latentforge.dataset.synthetic_cache import write_synthetic_cache
from latentforge.sinks.webdataset.commit import WebDatasetOptions, commit_webdataset
from latentforge.staging.staged_units import completed_units, open_staged_unit
from latentforge.storage import Storage
from latentforge.transfer import Destination

TEXT_TOKENS, TEXT_DIM = 512, 1024  # T5 rows of the perception preset: 1 MiB in float16
PERCEPTION_LATENT = (48, 24, 60, 104)  # 14.4 MB in float16


@dataclass
class Row:
    reader: str
    workers: int | None
    cache: str  # cold | warm
    seconds: float
    samples_per_s: float
    mb_per_s: float
    vs_raw: float  # samples/s relative to the raw read of the same state


def spec_for(sample_mb: float, samples: int, tiny: bool) -> SyntheticCacheSpec:
    if tiny:
        return SyntheticCacheSpec(num_samples=samples, latent_frames=3, latent_height=8, latent_width=16, text_dim=64,
                             max_length=32, rows_per_shard=8, content="noise")
    # Keep the preset's channels, frames and height; scale the width to reach the asked sample size.
    text_mb = TEXT_TOKENS * TEXT_DIM * 2 / 1e6
    per_column = PERCEPTION_LATENT[0] * PERCEPTION_LATENT[1] * PERCEPTION_LATENT[2] * 2 / 1e6
    width = max(1, round((sample_mb - text_mb) / per_column))
    return SyntheticCacheSpec(num_samples=samples, latent_frames=PERCEPTION_LATENT[1],
                              latent_height=PERCEPTION_LATENT[2],
                         latent_width=width, text_dim=TEXT_DIM, max_length=TEXT_TOKENS, rows_per_shard=32,
                         content="noise")


def cache_files(root: Path) -> list[Path]:
    return sorted(root.joinpath("shards").glob("*.h5"))


def drop_pages(paths: list[Path]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_sequential(paths: list[Path], limit: int | None = None) -> int:
    """Read files front to back in 16 MiB blocks (about one sample); return the bytes read."""
    buffer = bytearray(16 << 20)
    view = memoryview(buffer)
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while limit is None or total < limit:
                got = handle.readinto(view)
                if not got:
                    break
                total += got
    return total


def eviction_check(paths: list[Path], probe_bytes: int) -> tuple[float, float]:
    """(cold MB/s, warm MB/s) of a probe read; cold far below warm shows that the page drop works."""
    rates = []
    for _ in ("cold", "warm"):
        if not rates:
            drop_pages(paths)
        start = time.perf_counter()
        got = read_sequential(paths, probe_bytes)
        rates.append(got / 1e6 / (time.perf_counter() - start))
    return rates[0], rates[1]


def run_loader(root: Path, workers: int, batch_size: int) -> float:
    dataset = LatentCacheDataset(root)
    sampler = ResumableSampler(len(dataset), seed=0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                        collate_fn=collate_latent_batch, prefetch_factor=2 if workers else None)
    start = time.perf_counter()
    count = sum(batch["latent"].shape[0] for batch in loader)
    seconds = time.perf_counter() - start
    if count != len(dataset):
        raise RuntimeError(f"loader yielded {count} samples, expected {len(dataset)}")
    dataset.close()
    return seconds


def write_webdataset(root: Path, url: str, storage_options: dict, staging: Path, shard_bytes: int) -> None:
    """The HDF5 cache's staged units committed again as WebDataset tars at `url`."""
    config = CacheConfig.load(root)
    text = config.text
    with h5py.File(root / EMPTY_PROMPT, "r") as handle:
        empty = (handle[text.embeddings_dataset][()], handle[text.length_dataset][()])
    units = [path for _, path in sorted(completed_units(root / RUN_RECORDS_DIR).items())]
    planned = {}  # the units are all there is of this cache's plan: each accounts for its rows and rejects
    for path in units:
        with open_staged_unit(path) as staged:
            planned[staged.unit] = [r.source_index for r in staged.rows] + [r.source_index for r in staged.rejects]
    commit_webdataset(Destination(url, storage_options), units, [], config, empty,
                      WebDatasetOptions(staging, shard_bytes=shard_bytes, part_size=5 << 20), planned)


def run_streaming(url: str, storage_options: dict, workers: int, samples: int) -> float:
    dataset = StreamingLatentDataset(url, storage_options)
    loader = DataLoader(dataset, batch_size=None, num_workers=workers, prefetch_factor=2 if workers else None)
    start = time.perf_counter()
    count = sum(1 for _ in loader)
    seconds = time.perf_counter() - start
    if count != samples:
        raise RuntimeError(f"streaming loader yielded {count} samples, expected {samples}")
    return seconds


def read_objects(url: str, storage_options: dict) -> float:
    """Seconds to read every tar object of the cache whole, one after another: the raw object read."""
    store = Storage(url, storage_options)
    shards = [line.split("  ", 1)[1] for line in store.read("SHA256SUMS").decode().splitlines()
              if line.endswith(".tar") and "  shards/" in line]
    start = time.perf_counter()
    for rel in shards:
        store.read(rel)
    return time.perf_counter() - start


def bench_streaming(where: str, url: str, storage_options: dict, workers: list[int], samples: int,
                    sample_bytes: int, repeats: int, local: list[Path] | None) -> list[Row]:
    """Raw object reads and StreamingLatentDataset per worker count; local tars are measured cold (pages dropped
    before every run), objects on the loopback S3 server as they come."""
    times: dict[int | None, list[float]] = {None: [], **{count: [] for count in workers}}
    for _ in range(repeats):
        for count in times:
            if local:
                drop_pages(local)
            times[count].append(read_objects(url, storage_options) if count is None
                                else run_streaming(url, storage_options, count, samples))
    raw = statistics.median(times[None])
    rows = []
    for count, runs in times.items():
        seconds = statistics.median(runs)
        reader = f"raw object read ({where})" if count is None else f"StreamingLatentDataset ({where})"
        rows.append(Row(reader, count, "cold" if local else "moto S3", seconds, samples / seconds,
                        samples * sample_bytes / 1e6 / seconds, raw / seconds))
    return rows


def moto_s3() -> tuple[object, dict]:
    """A moto S3 server on loopback with an empty bucket `bench`; (server, fsspec storage options)."""
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError as error:
        raise SystemExit(f"the S3 rows need moto[server] and boto3 ({error}); install them or pass --no-s3")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                 region_name="us-east-1").create_bucket(Bucket="bench")
    return server, {"key": "bench", "secret": "bench", "endpoint_url": endpoint,
                    "client_kwargs": {"region_name": "us-east-1"}}


def machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory = next((line.split(":", 1)[1].strip() for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), "?")
    return {"host cpu": f"{cpu}, {len(os.sched_getaffinity(0))} usable cores", "memory": memory,
            "python": platform.python_version(), "torch": torch.__version__, "h5py": h5py.version.version,
            "kernel": platform.release()}


def filesystem(path: Path) -> str:
    best = ("?", "?", "")
    for line in Path("/proc/mounts").read_text().splitlines():
        device, mount, kind = line.split()[:3]
        if str(path.resolve()).startswith(mount) and len(mount) >= len(best[2]):
            best = (device, kind, mount)
    return f"{best[0]} ({best[1]}) mounted at {best[2]}"


def bench(root: Path, workers: list[int], batch_size: int, samples: int, sample_bytes: int, repeats: int) -> list[Row]:
    """Median seconds over `repeats` rounds; each round runs the raw read and every worker count in turn."""
    paths = cache_files(root)
    rows: list[Row] = []
    for state in ("cold", "warm"):
        times: dict[int | None, list[float]] = {None: [], **{count: [] for count in workers}}
        for _ in range(repeats):
            for count in times:
                if state == "cold":
                    drop_pages(paths)
                else:
                    read_sequential(paths)
                start = time.perf_counter()
                if count is None:
                    read_sequential(paths)
                    times[None].append(time.perf_counter() - start)
                else:
                    times[count].append(run_loader(root, count, batch_size))
        raw = statistics.median(times[None])
        for count, runs in times.items():
            seconds = statistics.median(runs)
            reader = "raw sequential read" if count is None else "LatentCacheDataset"
            rows.append(Row(reader, count, state, seconds, samples / seconds, samples * sample_bytes / 1e6 / seconds,
                            raw / seconds))
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", help="where to generate the cache (default: a temp folder, removed after)")
    parser.add_argument("--samples", type=int, default=None, help="samples in the cache (default 64; tiny 16)")
    parser.add_argument("--sample-mb", type=float, default=15.4, help="bytes of latent + text per sample, in MB")
    parser.add_argument("--workers", default=None, help="comma-separated DataLoader worker counts (default 0,2,4)")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=None,
                        help="rounds per measurement, the median is kept (default 3; tiny 1)")
    parser.add_argument("--tiny", action="store_true", help="tiny samples and workers 0,2: runs in seconds")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--no-s3", action="store_true", help="leave out the StreamingLatentDataset rows on moto S3")
    args = parser.parse_args(argv)
    samples = args.samples or (16 if args.tiny else 64)
    workers = [int(w) for w in (args.workers or ("0,2" if args.tiny else "0,2,4")).split(",")]
    spec = spec_for(args.sample_mb, samples, args.tiny)
    scratch = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="latentforge-bench-"))
    root = scratch / "cache"
    try:
        if root.exists():
            shutil.rmtree(root)
        write_synthetic_cache(root, spec)
        sample_bytes = 2 * (spec.latent_shape[0] * spec.latent_frames * spec.latent_height * spec.latent_width
                            + spec.max_length * spec.text_dim)
        probe = min(sum(p.stat().st_size for p in cache_files(root)), 256 << 20)
        cold_probe, warm_probe = eviction_check(cache_files(root), probe)
        repeats = args.repeats or (1 if args.tiny else 3)
        rows = bench(root, workers, args.batch_size, samples, sample_bytes, repeats)
        shard_bytes = sample_bytes * max(1, samples // 8)  # about 8 tars (trimmed text: a few more samples each)
        tars = scratch / "wds"
        write_webdataset(root, f"file://{tars}", {}, scratch / "staging", shard_bytes)
        rows += bench_streaming("local", f"file://{tars}", {}, workers, samples, sample_bytes, repeats,
                                sorted(tars.rglob("*.tar")))
        if not args.no_s3:
            server, options = moto_s3()
            try:
                write_webdataset(root, "s3://bench/wds", options, scratch / "staging", shard_bytes)
                rows += bench_streaming("moto S3", "s3://bench/wds", options, workers, samples, sample_bytes,
                                        repeats, None)
            finally:
                server.stop()
        info = {**machine(), "cache filesystem": filesystem(root)}
    finally:
        if not args.dir:
            shutil.rmtree(scratch, ignore_errors=True)
    evicted = cold_probe < 0.5 * warm_probe
    result = {"machine": info, "samples": samples, "sample_mb": sample_bytes / 1e6, "batch_size": args.batch_size,
              "eviction_probe_mb_s": {"cold": cold_probe, "warm": warm_probe, "confirmed": evicted},
              "rows": [asdict(r) for r in rows],
              "command": " ".join(["python bench/io/loader.py", *(sys.argv[1:] if argv is None else argv)])}
    print("\n".join(f"{key}: {value}" for key, value in info.items()))
    print(f"{samples} samples of {sample_bytes / 1e6:.2f} MB, batch size {args.batch_size}, median of "
          f"{args.repeats or (1 if args.tiny else 3)} rounds; eviction probe: cold "
          f"{cold_probe:.0f} MB/s vs warm {warm_probe:.0f} MB/s -> {'confirmed' if evicted else 'NOT confirmed'}")
    print("| reader | workers | cache | s | samples/s | MB/s | vs raw |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.reader} | {'-' if r.workers is None else r.workers} | {r.cache} | {r.seconds:.2f} | "
              f"{r.samples_per_s:.1f} | {r.mb_per_s:.0f} | {100 * r.vs_raw:.0f} % |")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
