"""ROOT/build/run.json: the resume key a build started with, the inputs' fingerprint and, after `--extend`, the
segments of its plan (builder/resume.py, builder/extend.py). Read and written only here.

The record is what makes a resume safe: staged units are committed only under the key they were encoded with.
So a damaged record is rebuilt from this run's config only while no unit is staged (nothing could then be
committed under another key); with staged units the resume is refused and names the fix.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from ..cache.layout import BUCKETS_DIR, RUN_RECORD
from ..errors import DamagedFile, DamagedFileWarning
from ..io import canonical_json, write_text_atomic
from ..staging.staged_units import completed_units

RESTART = "rerun with --overwrite to start over, or use another output root"


def run_record_path(build_dir: Path) -> Path:
    return Path(build_dir) / RUN_RECORD


def _problem(data: Any) -> str | None:
    """What keeps `data` from being a run record, or None."""
    if not isinstance(data, dict):
        return f"holds {type(data).__name__}, not an object"
    if not isinstance(data.get("key"), dict) or not isinstance(data["key"].get("config"), dict):
        return "no resume key"
    inputs = data.get("inputs")
    if not isinstance(inputs, dict) or not isinstance(inputs.get("entries"), dict) or "sha256" not in inputs:
        return "no inputs fingerprint"
    segments = data.get("segments", [0])
    if not isinstance(segments, list) or not segments or not all(isinstance(s, int) for s in segments):
        return f"segments {segments!r} are not a list of plan indices"
    return None


def read_run_record(build_dir: Path) -> dict[str, Any] | None:
    """The record (None when there is none); DamagedFile when it does not parse as one."""
    path = run_record_path(build_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not UTF-8
        raise DamagedFile(path, str(error), f"it records the config the staged units were encoded with; {RESTART}"
                          ) from None
    problem = _problem(data)
    if problem is not None:
        raise DamagedFile(path, problem, f"it records the config the staged units were encoded with; {RESTART}")
    return data


def write_run_record(build_dir: Path, key: dict[str, Any], inputs: dict[str, Any],
                     segments: list[int] | None = None) -> None:
    record: dict[str, Any] = {"key": key, "inputs": inputs}
    if segments is not None:
        record["segments"] = segments
    write_text_atomic(run_record_path(build_dir), canonical_json(record))


def _staged_work(build_dir: Path) -> str | None:
    """What a build under `build_dir` has staged: its units, or a bucketed root's caches beside it."""
    units = completed_units(build_dir)
    if units:
        return f"the {len(units)} staged unit(s)"
    return "the bucket caches" if (Path(build_dir).parent / BUCKETS_DIR).is_dir() else None


def set_aside_damaged_record(build_dir: Path) -> None:
    """Before a plain build resumes: a damaged run.json is removed, with a warning, when nothing is staged (this
    run then records its own key and inputs, as a first run does); with staged work, DamagedFile says to start
    over. An intact record, or none, is left to check_config and check_inputs."""
    try:
        read_run_record(build_dir)
        return
    except DamagedFile as damaged:
        staged = _staged_work(build_dir)
        if staged is not None:
            raise DamagedFile(damaged.path, damaged.problem, f"it holds the config {staged} were encoded with, so "
                              f"they cannot be resumed safely; {RESTART}") from None
        run_record_path(build_dir).unlink()
        warnings.warn(f"{damaged.path} was damaged ({damaged.problem}); nothing is staged yet, so it is rebuilt "
                      "from this run's config and inputs", DamagedFileWarning, stacklevel=2)
