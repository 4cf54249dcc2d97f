"""Deep verify of per-frame side streams (docs/verify.md): the values a cache stores for each spot sample's side
streams against what the source files give at the sample's recorded frame times, re-read by the same rule the build
used (pipeline/side_streams.py). The rows are copied, never computed, so they must be equal bit for bit."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..cache.check_report import CheckRecorder
from ..cache.rows import ManifestRow
from ..pipeline.sample import SamplePixels

CHECK = "side_streams"


def check_side_streams(rec: CheckRecorder, rows: list[ManifestRow], pixels: dict[int, SamplePixels],
                       names: list[str], stored: Callable[[ManifestRow, str], np.ndarray]) -> None:
    """Fail once per sample and stream whose stored values differ from the source's; `stored(row, name)` reads
    the cache's row. Samples whose sources could not be re-read are reported by the sources check already."""
    if not names:
        return
    checked = 0
    for row in rows:
        fresh = pixels.get(row.dataset_index)
        if fresh is None:
            continue
        checked += 1
        for name in names:
            kept, source = np.asarray(stored(row, name)), fresh.side.get(name)
            path = fresh.sample.entry.side.get(name)
            if source is None or kept.shape != source.shape:
                shape = None if source is None else list(source.shape)
                rec.fail(CHECK, f"dataset_index {row.dataset_index} sample {row.sample_id!r}: side stream {name!r} "
                         f"is stored as {list(kept.shape)}, {path} gives {shape}", row.dataset_index)
            elif not np.array_equal(kept, source):
                frames = np.nonzero((kept != source).any(axis=1))[0].tolist()
                rec.fail(CHECK, f"dataset_index {row.dataset_index} sample {row.sample_id!r}: side stream {name!r} "
                         f"differs from {path} at window frames {frames[:8]} (largest difference "
                         f"{float(np.abs(kept.astype(np.float64) - source).max()):g}); the file changed after the "
                         "build, or the cache was altered", row.dataset_index)
    rec.close(CHECK, f"the side streams ({', '.join(names)}) of {checked} samples equal what their files give at the "
              "recorded frame times")
