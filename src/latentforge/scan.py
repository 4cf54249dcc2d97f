"""`latentforge scan` (= `build --no-encode`): the CPU-only probe over the whole input, before GPU work.

Writes ROOT/build/scan-rejects.jsonl (the probe's and the plan's rejects, DESIGN §5 reasons) and
ROOT/build/scan-<utc>.json (counts, reasons, output-size estimate, free disk, encode-time estimate). Not
ROOT/rejects.jsonl: that file is part of the checksummed cache and is written only by commit.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from .build import output_shapes, plan_samples, probe_all
from .config import BuildConfig
from .estimate import estimate_output_bytes
from .executor.local import resolve_slots
from .io import write_jsonl_atomic, write_text_atomic
from .lock import BuildLock
from .progress import BuildProgress
from .records import Reject
from .stats import utc_stamp

REJECTS_NAME = "scan-rejects.jsonl"


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


def _free_bytes(root: Path) -> int:
    folder = root.absolute()
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free


def _calibrate(config: BuildConfig, samples, probes, count: int) -> float | None:
    """Seconds to decode+encode one sample on run.device: time `count` samples after one warm-up."""
    from .executor.rank import load_models
    from .executor.unit import Unit, UnitContext, decode_sample, run_unit

    accepted = [s for s in samples if not isinstance(probes[s.source_index], Reject)][: count + 1]
    if len(accepted) < 2:
        return None
    tokenizer, text = load_models(config, resolve_slots(config).devices[0])
    from .text.prompt_cache import PromptCache

    ctx = UnitContext(config, tokenizer, PromptCache(text) if text else None, stage=lambda payload: None)
    seconds = []
    for sample in accepted:
        unit = Unit(-1, (sample,), {sample.source_index: probes[sample.source_index]})
        started = time.perf_counter()
        run_unit(unit, ctx, [decode_sample(sample, probes[sample.source_index], config)])
        seconds.append(time.perf_counter() - started)
    return sum(seconds[1:]) / len(seconds[1:])


def scan(config: BuildConfig, calibrate: int = 0, quiet: bool = False) -> ScanResult:
    root = Path(config.output.root)
    build_dir = root / "build"
    with BuildLock(build_dir):
        samples, plan_rejects = plan_samples(config)
        probes = probe_all(samples, config, BuildProgress(quiet))
        rejects = plan_rejects + [p for p in probes.values() if isinstance(p, Reject)]
        rejects_path = build_dir / REJECTS_NAME
        write_jsonl_atomic(rejects_path, [r.to_json() for r in rejects])
        accepted = len(samples) - (len(rejects) - len(plan_rejects))
        latent, text = output_shapes(config)
        needed = estimate_output_bytes(accepted, latent, text, config.output.storage_dtype,
                                       rows_per_shard=config.output.rows_per_shard)
        free = _free_bytes(root)
        per_sample = _calibrate(config, samples, probes, calibrate) if calibrate > 0 else None
        slots = len(resolve_slots(config).devices)
        hours = None if per_sample is None else per_sample * accepted / slots / 3600
        result = ScanResult(len(samples), accepted, dict(sorted(Counter(r.reason for r in rejects).items())),
                            needed, free, needed + config.output.min_free_bytes <= free, per_sample, hours,
                            rejects_path)
        record = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(result).items()}
        write_text_atomic(build_dir / f"scan-{utc_stamp()}.json", json.dumps(record, indent=2) + "\n")
        return result
