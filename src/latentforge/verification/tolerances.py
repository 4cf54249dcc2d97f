"""How a fresh encoding is compared with a stored one: bit for bit where the build's environment is this one,
else within the documented tolerance of the precision mode plus the storage cast (docs/verify.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cache.layout import RUN_RECORDS_DIR, RUN_STATS_GLOB
from ..errors import ConfigError
from ..pipeline.environment import environment_record

# One float16 rounding step moves a value by at most 2^-10 of itself, so it moves rel-L2 by at most 2^-10.
STORAGE_TOLERANCE = {"float16": 2.0**-10, "float32": 0.0}


@dataclass(frozen=True)
class Comparison:
    """Exactly equal after the storage cast, or relative L2 within `tolerance`."""

    exact: bool
    tolerance: float
    why: str

    def describe(self) -> str:
        how = "exact (bit for bit after the storage cast)" if self.exact else f"rel-L2 <= {self.tolerance:.3g}"
        return f"{how}: {self.why}"

    def problem(self, stored: np.ndarray, fresh: np.ndarray) -> str | None:
        """None when `fresh` matches `stored`, else what differs."""
        a, b = stored.astype(np.float64), fresh.astype(np.float64)
        if a.shape != b.shape:
            return f"shape {list(a.shape)} stored, {list(b.shape)} re-encoded"
        differs = a != b
        if not differs.any():
            return None
        rel = float(np.linalg.norm(a - b) / max(np.linalg.norm(b), np.finfo(np.float64).tiny))
        if not self.exact and rel <= self.tolerance:
            return None
        first = tuple(int(v) for v in np.argwhere(differs)[0])
        return (f"{int(differs.sum())} values differ (rel-L2 {rel:.3g}, max |diff| {np.abs(a - b).max():.4g}; first at "
                f"[c,t,y,x]={list(first)}: stored {a[first]:.6g}, re-encoded {b[first]:.6g})")


def tolerance_for(precisions: dict[str, float], precision: str, storage_dtype: str) -> float:
    """The rel-L2 a re-encode elsewhere may differ by: the model's, for `precision`, plus the storage cast."""
    if precision not in precisions or storage_dtype not in STORAGE_TOLERANCE:
        raise ConfigError(f"no re-encode tolerance for precision {precision!r} / storage {storage_dtype!r}; known: "
                          f"{', '.join(precisions)} / {', '.join(STORAGE_TOLERANCE)}")
    return precisions[precision] + STORAGE_TOLERANCE[storage_dtype]


def build_environment(root: Path) -> tuple[dict[str, str] | None, str]:
    """The environment every run of the build recorded (`environment` in build/stats-*.json), or None and why."""
    runs = sorted((Path(root) / RUN_RECORDS_DIR).glob(RUN_STATS_GLOB))
    recorded = [json.loads(path.read_text(encoding="utf-8")).get("environment") for path in runs]
    if not recorded or any(env is None for env in recorded):
        return None, "the build did not record its environment (build/stats-*.json has no 'environment')"
    if any(env != recorded[0] for env in recorded):
        return None, "the build's runs (resumes) ran in different environments"
    return recorded[0], "recorded"


def choose_comparison(root: Path, device: str, tolerance: float, autotuned: bool,
                      execution_changes: list[str]) -> Comparison:
    """Exact when the build recorded an environment equal to this one, the tokenizer's software versions agree
    and no kernel was chosen by timing; otherwise the documented tolerance, saying why."""
    built, why = build_environment(root)
    current = environment_record(device)
    if built is not None and built != current:
        changed = [f"{k} {built.get(k)!r} -> {current.get(k)!r}" for k in sorted(built.keys() | current.keys())
                   if built.get(k) != current.get(k)]
        why = "environment differs from the build's: " + ", ".join(changed)
    elif built is not None and execution_changes:
        why = "tokenizer software or code path differs from the build's: " + ", ".join(execution_changes)
    elif built is not None and autotuned:
        why = "the build let cuDNN autotune its kernels (tokenizer.cudnn_benchmark), which may choose others here"
    elif built is not None:
        return Comparison(True, 0.0, "device model and software match the build's")
    return Comparison(False, tolerance, f"{why} (rel-L2 tolerance {tolerance:.3g}, the storage cast included)")
