"""The outcome of a verify: named checks that pass or fail, each failure pointing at the dataset_index it
concerns where one applies. Shared by the integrity checks and the deep verify."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Past this many failures of one check the rest are counted, not listed: one bad shard can fail 3000 rows.
MAX_LISTED = 20


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    dataset_index: int | None = None


@dataclass
class VerifyReport:
    checks: list[Check] = field(default_factory=list)
    warnings: list[Check] = field(default_factory=list)  # worth knowing, not a failure

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [check for check in self.checks if not check.ok]


class CheckRecorder:
    """Collects failures per check name, then one passing line per check that never failed."""

    def __init__(self) -> None:
        self.report = VerifyReport()
        self._failed: Counter[str] = Counter()

    def fail(self, name: str, detail: str, dataset_index: int | None = None) -> None:
        self._failed[name] += 1
        if self._failed[name] <= MAX_LISTED:
            self.report.checks.append(Check(name, False, detail, dataset_index))

    def warn(self, name: str, detail: str) -> None:
        self.report.warnings.append(Check(name, True, detail))

    def close(self, name: str, passed_detail: str) -> None:
        """Add the passing line of `name`, or the count of failures not listed."""
        if not self._failed[name]:
            self.report.checks.append(Check(name, True, passed_detail))
        elif self._failed[name] > MAX_LISTED:
            self.report.checks.append(Check(name, False, f"{self._failed[name] - MAX_LISTED} more failures"))
