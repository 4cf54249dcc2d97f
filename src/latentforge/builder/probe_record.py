"""Probe results remembered between runs of one build (build/probes.pickle), so a rerun or an `--extend` probes only
the samples that are new or whose sources changed: the probe decodes each video once from its start, about a second
of CPU per 10 s of 720p, and repeating it for every sample made a rerun with nothing to do cost a quarter of a fresh
build.

A result is reused when the sample's content key (pipeline.plan.content_key: the size and mtime of each source, the
caption's hash, the window's start), the sources' paths (a result names them) and the digest of the settings a probe
reads (the build's resume key without the dataset's paths, which `--extend` may change) are the ones recorded with it.
`--recheck` probes everything again.

The record is written whole, atomically, after each probe (a kill mid-probe leaves the last one); it is the build's
own file, read back by the build only, as the probe's worker processes already hand results over (pickle). The
driver records it wherever the executor ran the probe (Executor.run_probe).
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from pathlib import Path
from typing import Any, Callable, Collection

from ..cache.layout import PROBE_RECORD
from ..executor.parallel_probe import Probed
from ..io import canonical_json, write_bytes_atomic
from ..pipeline.plan import content_key
from ..pipeline.probe import ProbeResult
from ..progress import Advance, uncounted
from ..records import Reject, Sample

_FORMAT = 2  # 2: frame times and window indices packed (packed_numbers.py)


def settings_digest(resume_key: dict[str, Any]) -> str:
    """What a probe result depends on besides its sample: the resume key without the dataset's paths."""
    key = dict(resume_key, config=dict(resume_key["config"]))
    key["config"]["dataset"] = {k: v for k, v in key["config"]["dataset"].items() if k != "path"}
    return hashlib.sha256(canonical_json(key).encode("utf-8")).hexdigest()


def _sample_key(sample: Sample) -> str:
    entry = sample.entry
    return f"{content_key(sample)} {[entry.video, entry.mask, entry.depth, *sorted(entry.side.items())]}"


def _reused(result: ProbeResult | Reject, sample: Sample) -> ProbeResult | Reject:
    """A recorded result for `sample` at its place in this plan (a reject names the place)."""
    return dataclasses.replace(result, source_index=sample.source_index) if isinstance(result, Reject) else result


def _read(build_dir: Path, settings: str) -> dict[str, tuple[str, ProbeResult | Reject]]:
    try:
        data = pickle.loads((Path(build_dir) / PROBE_RECORD).read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return {}  # none yet, or not one this version wrote: probe again
    if not isinstance(data, dict) or data.get("format") != _FORMAT or data.get("settings") != settings:
        return {}
    return data.get("results", {})


def probe_remembered(samples: list[Sample], build_dir: Path, resume_key: dict[str, Any],
                     probe: Callable[[list[Sample], Advance], Probed], advance: Advance = uncounted,
                     recheck: bool = False, kept: Collection[str] = ()) -> Probed:
    """{source_index: probe result or reject} of every sample, as pipeline.probe gives them and in their order:
    recorded results whose sample and settings are unchanged, the rest probed by `probe` (the executor's run_probe)
    and recorded with them here. `kept`: ids whose recorded result stands whatever their sources are now (the ids an
    --extend keeps although the input no longer lists them: their rows stay as they were)."""
    settings = settings_digest(resume_key)
    known = {} if recheck else _read(build_dir, settings)
    keys = {sample.sample_id: _sample_key(sample) for sample in samples}
    probes: Probed = {}
    todo = []
    for sample in samples:
        hit = known.get(sample.sample_id)
        if hit is not None and (hit[0] == keys[sample.sample_id] or sample.sample_id in kept):
            keys[sample.sample_id] = hit[0]
            probes[sample.source_index] = _reused(hit[1], sample)
        else:
            todo.append(sample)
    advance(len(samples) - len(todo))
    if todo or len(known) != len(samples):
        probes.update(probe(todo, advance))
        results = {s.sample_id: (keys[s.sample_id], probes[s.source_index]) for s in samples}
        write_bytes_atomic(Path(build_dir) / PROBE_RECORD,
                           pickle.dumps({"format": _FORMAT, "settings": settings, "results": results}, protocol=5))
    return {sample.source_index: probes[sample.source_index] for sample in samples}
