"""Deep verify of a cache's sound (audio.enabled, docs/audio.md): each spot sample's window decoded again from its
video's start and compared with the stored rows bit for bit, its manifest record with the fresh one."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..cache.audio_section import AUDIO, AUDIO_LENGTH, AUDIO_SPAN
from ..cache.check_report import CheckRecorder
from ..cache.rows import ManifestRow
from ..pipeline.sample import SamplePixels

CHECK = "audio"


def check_audio(rec: CheckRecorder, rows: list[ManifestRow], pixels: dict[int, SamplePixels],
                stored: Callable[[ManifestRow, str], np.ndarray]) -> None:
    """Record a failure for every spot row whose stored sound or audio record differs from a fresh decode."""
    for row in rows:
        fresh = pixels[row.dataset_index]
        for name in (AUDIO, AUDIO_SPAN, AUDIO_LENGTH):
            if not np.array_equal(stored(row, name), fresh.audio[name]):
                rec.fail(CHECK, f"dataset_index {row.dataset_index}: {name} differs from the window decoded again",
                         row.dataset_index)
        if row.provenance.get("audio") != fresh.provenance.get("audio"):
            rec.fail(CHECK, f"dataset_index {row.dataset_index}: audio recorded {row.provenance.get('audio')!r}, "
                     f"the source gives {fresh.provenance.get('audio')!r}", row.dataset_index)
    rec.close(CHECK, f"{len(rows)} samples' sound decoded again from each video's start, equal bit for bit to the "
              "stored PCM, span and length")
