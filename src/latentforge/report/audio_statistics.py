"""A cache's audio coverage for `stats` (docs/audio.md): from each manifest row's `provenance.audio`, the fraction of
samples some audio covers and the mean fraction of the window it covers (0 for a window without audio)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cache.rows import ManifestRow


@dataclass(frozen=True)
class AudioCoverage:
    samples: int  # rows with an audio record
    with_audio: float  # fraction of them some audio covers
    mean_covered: float  # mean over them of the covered share of the window's own length


class AudioCoverageAccumulator:
    def __init__(self, sample_rate: int) -> None:
        self.rate = sample_rate
        self.samples = self.present = 0
        self.covered = 0.0

    def add(self, row: ManifestRow) -> None:
        record: dict[str, Any] | None = row.provenance.get("audio")
        if record is None:
            return
        self.samples += 1
        if record["present"] and record["samples"]:
            self.present += 1
            self.covered += (record["end_s"] - record["start_s"]) * self.rate / record["samples"]

    def result(self) -> AudioCoverage:
        if not self.samples:
            return AudioCoverage(0, 0.0, 0.0)
        return AudioCoverage(self.samples, self.present / self.samples, self.covered / self.samples)
