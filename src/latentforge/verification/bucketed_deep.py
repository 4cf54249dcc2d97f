"""Deep verify of a bucketed root: the root's integrity verify (root and every bucket), then the deep checks of
every bucket's cache on its own spot samples, in one report whose verdict covers them all (docs/verify.md)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cache.bucket_index import BucketIndex
from ..cache.check_report import Check, VerifyReport
from ..cache.layout import RUN_RECORDS_DIR, VERIFY_REPORT
from ..devices import check_device_present
from ..io import atomic_path
from ..pipeline.environment import environment_record
from ..progress import Progress
from ..sinks.hdf5.bucket_integrity import verify_bucketed
from .deep import DEFAULT_SPOT, DeepReport, run_deep_checks
from .quality import Quality, QualityThresholds
from .reencode import Overrides


@dataclass
class BucketedDeepReport:
    """The same face as DeepReport (integrity, checks, warnings, quality, comparison, ok, failures), with each
    bucket's deep checks, warnings and quality rows named `<bucket>/...`; `buckets` keeps each bucket's report."""

    integrity: VerifyReport
    buckets: dict[str, DeepReport] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    thresholds: QualityThresholds = field(default_factory=QualityThresholds)
    path: Path | None = None

    def _named(self, pick: str) -> list[Check]:
        return [dataclasses.replace(check, name=f"{name}/{check.name}")
                for name, report in self.buckets.items() for check in getattr(report, pick)]

    @property
    def checks(self) -> list[Check]:
        return self._named("checks")

    @property
    def warnings(self) -> list[Check]:
        return self._named("warnings")

    @property
    def quality(self) -> list[Quality]:
        return [dataclasses.replace(q, modality=f"{name}/{q.modality}")
                for name, report in self.buckets.items() for q in report.quality]

    @property
    def comparison(self) -> str:
        return "; ".join(f"{name}: {report.comparison}" for name, report in self.buckets.items()) or "not run"

    @property
    def spot(self) -> dict[str, list[int]]:
        return {name: report.spot for name, report in self.buckets.items()}

    @property
    def ok(self) -> bool:
        return self.integrity.ok and all(report.ok for report in self.buckets.values())

    @property
    def failures(self) -> list[Check]:
        return self.integrity.failures + [check for check in self.checks if not check.ok]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "environment": self.environment,
                "integrity": [dataclasses.asdict(c) for c in self.integrity.checks],
                "thresholds": dataclasses.asdict(self.thresholds),
                "buckets": {name: {key: value for key, value in report.to_json().items()
                                   if key not in ("environment", "integrity", "thresholds")}
                            for name, report in self.buckets.items()}}


def verify_bucketed_deep(root: Path, spot: int = DEFAULT_SPOT, overrides: Overrides = Overrides(),
                         thresholds: QualityThresholds = QualityThresholds(), require_complete: bool = True,
                         report_path: Path | None = None, progress: Progress | None = None) -> BucketedDeepReport:
    """Integrity of the whole root; when it passes, the deep checks of each bucket on `spot` samples spread
    evenly over that bucket. Writes the report as JSON (default ROOT/build/verify_report.json)."""
    root = Path(root)
    check_device_present(overrides.device, "--device")  # before the integrity pass, which can take minutes
    report = BucketedDeepReport(verify_bucketed(root, require_complete, progress),
                                environment=environment_record(overrides.device), thresholds=thresholds)
    if report.integrity.ok:
        for entry in BucketIndex.load(root).filled:
            bucket = DeepReport(integrity=VerifyReport(), environment=report.environment, thresholds=thresholds)
            run_deep_checks(root / str(entry.path), spot, overrides, thresholds, None, bucket, progress)
            report.buckets[entry.name] = bucket
    report.path = Path(report_path) if report_path else root / RUN_RECORDS_DIR / VERIFY_REPORT
    with atomic_path(report.path) as tmp:
        tmp.write_text(json.dumps(report.to_json(), indent=2, allow_nan=True), encoding="utf-8")
    return report

