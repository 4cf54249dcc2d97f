"""`latentforge scan` (= `build --no-encode`): the CPU-only probe over the whole input, before GPU work.

Writes ROOT/build/scan-rejects.jsonl (the probe's and the plan's rejects, with the reasons of docs/rejects.md) and
ROOT/build/scan-<utc>.json (counts, reasons, output-size estimate, free disk, encode-time estimate). Not
ROOT/rejects.jsonl: that file is part of the checksummed cache and is written only by commit.
"""

from __future__ import annotations

import json
import shutil
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from ..cache.layout import SCAN_REJECTS, scan_record_name
from ..config import BuildConfig
from ..config.buckets import parse_buckets
from ..errors import InputNotice
from ..executor.base import Executor
from ..executor.rank_stats import utc_stamp
from ..io import write_jsonl_atomic, write_text_atomic
from ..pipeline.models import load_models
from ..pipeline.plan import plan_samples
from ..pipeline.probe import ProbeResult, vfr_notice
from ..pipeline.unit import UnitContext, run_unit
from ..pipeline.unit_inputs import Unit, decode_sample
from ..records import Reject
from ..text.prompt_cache import PromptCache
from .bucket_run import bucket_config
from .estimate import conditioning_values, estimate_output_bytes, output_shapes, side_values
from .lock import BuildLock
from .parallel_analysis import analyser
from .placement import executor_for
from .preflight import preflight
from .progress import BuildProgress
from .records_dir import build_records_dir
from .reject_limit import reject_problem


@dataclass(frozen=True)
class ScanResult:
    planned: int
    accepted: int
    rejects_by_reason: dict[str, int]
    output_bytes: int  # upper estimate of the finished cache
    free_bytes: int
    disk_ok: bool  # output_bytes + output.min_free_bytes fit on the disk
    encode_seconds_per_sample: float | None  # measured on run.device, None when calibrate=0 or nothing accepted
    encode_hours: float | None  # for all accepted samples over every slot
    rejects_path: Path
    reject_problem: str | None  # why a build of this input would stop (run.max_reject_fraction), else None
    buckets: dict[str, int] | None = None  # frames.buckets: accepted samples per bucket, in config order


def _free_bytes(root: Path) -> int:
    folder = root.absolute()
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free


def _calibrate(config: BuildConfig, executor: Executor, samples, probes, count: int) -> float | None:
    """Seconds to decode+encode one sample on the executor's main device: `count` samples after one warm-up."""
    accepted = [s for s in samples if not isinstance(probes[s.source_index], Reject)][: count + 1]
    if len(accepted) < 2:
        return None
    tokenizer, text = load_models(config, executor.main_device())
    ctx = UnitContext(config, tokenizer, PromptCache(text) if text else None, stage=lambda payload: None)
    seconds = []
    for sample in accepted:
        unit = Unit(-1, (sample,), {sample.source_index: probes[sample.source_index]})
        started = time.perf_counter()
        run_unit(unit, ctx, [decode_sample(sample, probes[sample.source_index], config)])
        seconds.append(time.perf_counter() - started)
    return sum(seconds[1:]) / len(seconds[1:])


def bucket_histogram(config: BuildConfig, probes: dict[int, ProbeResult | Reject]) -> dict[str, int] | None:
    """Accepted samples per bucket, every configured bucket listed; None without frames.buckets."""
    if not config.frames.buckets:
        return None
    counts = Counter(p.bucket["name"] for p in probes.values() if isinstance(p, ProbeResult) and p.bucket)
    return {bucket.name: counts[bucket.name] for bucket in parse_buckets(config.frames)}


def _caches(config: BuildConfig, accepted: int, histogram: dict[str, int] | None
            ) -> list[tuple[int, BuildConfig]]:
    """(samples, the config that shapes them) of each cache the build would write."""
    if histogram is None:
        return [(accepted, config)]
    root = Path(config.output.root)
    return [(histogram[b.name], bucket_config(config, root, b)) for b in parse_buckets(config.frames)]


def scan(config: BuildConfig, calibrate: int = 0, quiet: bool = False) -> ScanResult:
    build_dir = build_records_dir(config)
    executor = executor_for(config, build_dir, quiet)
    preflight(config, executor)
    with BuildLock(build_dir):
        samples, plan_rejects = plan_samples(config, analyser(
            config, build_dir, lambda videos: BuildProgress(quiet).task("shots", videos)))
        with BuildProgress(quiet).task("probe", len(samples)) as advance:
            probes = executor.run_probe(samples, advance)
        notice = vfr_notice(samples, probes)
        if notice is not None:
            warnings.warn(notice, InputNotice, stacklevel=2)
        rejects = plan_rejects + [p for p in probes.values() if isinstance(p, Reject)]
        rejects_path = build_dir / SCAN_REJECTS
        write_jsonl_atomic(rejects_path, [r.to_json() for r in rejects])
        accepted = len(samples) - (len(rejects) - len(plan_rejects))
        histogram = bucket_histogram(config, probes)
        needed = 0
        for count, shaped in _caches(config, accepted, histogram):
            latent, text = output_shapes(shaped)
            needed += estimate_output_bytes(count, latent, text, config.output.storage_dtype,
                                            rows_per_shard=config.output.rows_per_shard,
                                            conditioning=conditioning_values(shaped),
                                            side=side_values(shaped))
        free = _free_bytes(build_dir.parent)  # where staged units go: the root for hdf5
        per_sample = _calibrate(config, executor, samples, probes, calibrate) if calibrate > 0 else None
        hours = None if per_sample is None else per_sample * accepted / executor.parallel_ranks() / 3600
        problem = reject_problem(len(samples) + len(plan_rejects), rejects, config.run.max_reject_fraction,
                                 "by the plan and the probe")
        result = ScanResult(len(samples), accepted, dict(sorted(Counter(r.reason for r in rejects).items())),
                            needed, free, needed + config.output.min_free_bytes <= free, per_sample, hours,
                            rejects_path, problem, histogram)
        record = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(result).items()}
        write_text_atomic(build_dir / scan_record_name(utc_stamp()), json.dumps(record, indent=2) + "\n")
        return result
