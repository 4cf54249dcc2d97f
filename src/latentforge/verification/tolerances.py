"""How a fresh encoding is compared with a stored one: bit for bit where the build's environment is this one,
else within the documented tolerance of the precision mode plus the storage cast (docs/verify.md). Token ids
have no distance: they are compared by the fraction of positions whose id is equal."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..pipeline.environment import environment_record

# One float16 rounding step moves a value by at most 2^-10 of itself, so it moves rel-L2 by at most 2^-10.
# Token ids are stored exactly.
STORAGE_TOLERANCE = {"float16": 2.0**-10, "float32": 0.0, "uint16": 0.0, "uint32": 0.0}


@dataclass(frozen=True)
class Comparison:
    """Exactly equal after the storage cast, or relative L2 within `tolerance` (token ids: at most a `tolerance`
    fraction of the ids differ)."""

    exact: bool
    tolerance: float
    why: str
    tokens: bool = False

    def describe(self) -> str:
        if self.tokens:
            how = "exact (every token id equal)" if self.exact else f"equal ids >= {1 - self.tolerance:.3g}"
        else:
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
        if self.tokens:
            return self._id_problem(a, b, differs)
        rel = float(np.linalg.norm(a - b) / max(np.linalg.norm(b), np.finfo(np.float64).tiny))
        if not self.exact and rel <= self.tolerance:
            return None
        first = tuple(int(v) for v in np.argwhere(differs)[0])
        return (f"{int(differs.sum())} values differ (rel-L2 {rel:.3g}, max |diff| {np.abs(a - b).max():.4g}; first at "
                f"[c,t,y,x]={list(first)}: stored {a[first]:.6g}, re-encoded {b[first]:.6g})")


    def _id_problem(self, a: np.ndarray, b: np.ndarray, differs: np.ndarray) -> str | None:
        equal = 1 - float(differs.mean())
        if not self.exact and equal >= 1 - self.tolerance:
            return None
        first = tuple(int(v) for v in np.argwhere(differs)[0])
        return (f"{int(differs.sum())} of {differs.size} token ids differ (equal fraction {equal:.4f}; first at "
                f"[m,t,y,x]={list(first)}: stored {int(a[first])}, re-encoded {int(b[first])})")


def equal_id_fraction(stored: np.ndarray, fresh: np.ndarray) -> tuple[int, int]:
    """(equal ids, ids) of two arrays of token ids of one shape."""
    return int(np.count_nonzero(stored == fresh)), int(stored.size)


def tolerance_for(precisions: dict[str, float], precision: str, storage_dtype: str) -> float:
    """The rel-L2 a re-encode elsewhere may differ by: the model's, for `precision`, plus the storage cast."""
    if precision not in precisions or storage_dtype not in STORAGE_TOLERANCE:
        raise ConfigError(f"no re-encode tolerance for precision {precision!r} / storage {storage_dtype!r}; known: "
                          f"{', '.join(precisions)} / {', '.join(STORAGE_TOLERANCE)}")
    return precisions[precision] + STORAGE_TOLERANCE[storage_dtype]


def choose_comparison(environments: list[dict[str, str]], device: str, tolerance: float, autotuned: list[str],
                      execution_changes: list[str], tokens: bool = False) -> Comparison:
    """Exact when the cache's units were all encoded in one environment equal to this one, with the same
    tokenizer software and no kernel chosen by timing (`autotuned`: the tokenizer keys that let each process time
    its kernels, set in the build); otherwise the documented tolerance, saying why."""
    current = environment_record(device)
    if not environments:
        why = "cache_config.json does not record the environment that encoded the units"
    elif len(environments) > 1:
        why = f"the units were encoded in {len(environments)} environments"
    elif environments[0] != current:
        built = environments[0]
        changed = [f"{k} {built.get(k)!r} -> {current.get(k)!r}" for k in sorted(built.keys() | current.keys())
                   if built.get(k) != current.get(k)]
        why = "environment differs from the build's: " + ", ".join(changed)
    elif execution_changes:
        why = "tokenizer software or code path differs from the build's: " + ", ".join(execution_changes)
    elif autotuned:
        keys = ", ".join(f"tokenizer.{key}" for key in autotuned)
        why = f"the build let each process autotune its kernels ({keys}), which may choose others here"
    else:
        return Comparison(True, 0.0, "device model and software match the build's", tokens)
    if tokens:
        return Comparison(False, tolerance, f"{why} (up to {tolerance:.3g} of the token ids may differ)", tokens)
    return Comparison(False, tolerance, f"{why} (rel-L2 tolerance {tolerance:.3g}, the storage cast included)")
