"""Deep verify: does a cache hold what its sources, tokenizer and text encoder give? (docs/verify.md)

On top of the integrity checks, for N spot samples: re-read the sources at the recorded frame indices,
re-encode each spot sample's recorded batch with the recorded tokenizer and compare with the stored latents,
check latent frame 0 against pixel frame 0 encoded alone, decode the stored latents and measure PSNR/SSIM
per modality, and re-encode the prompts. A tokenizer whose SHA-256 differs from cache_config.json is refused
before any of that runs. Here: the report, the spot samples and the order the checks run in; the checks themselves
are verification/deep_checks.py's.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..cache.check_report import Check, CheckRecorder, VerifyReport
from ..cache.config_file import CacheConfig
from ..cache.layout import RUN_RECORDS_DIR, VERIFY_REPORT
from ..cache.rows import manifest_rows
from ..config.option_roles import autotuning_keys
from ..devices import check_device_present
from ..errors import ConfigError
from ..io import atomic_path
from ..pipeline.environment import environment_record
from ..pipeline.kernel_plans import recorded_plans
from ..progress import Progress
from ..sinks.hdf5.integrity import verify_integrity
from ..tokenizers.kernel_planning import replay_plans
from .audio_check import check_audio, check_audio_latent
from .deep_checks import DeepChecks, stored_row
from .quality import Quality, QualityThresholds
from .reencode import Overrides, SampleFinder, recorded_config
from .side_check import check_side_streams
from .tolerances import choose_comparison, tolerance_for

DEFAULT_SPOT = 4


@dataclass
class DeepReport:
    integrity: VerifyReport
    checks: list[Check] = field(default_factory=list)
    warnings: list[Check] = field(default_factory=list)
    comparison: str = "not run"
    spot: list[int] = field(default_factory=list)
    quality: list[Quality] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    thresholds: QualityThresholds = field(default_factory=QualityThresholds)
    path: Path | None = None  # where the JSON report was written
    exact_id_fraction: float | None = None  # token caches: the re-encoded ids equal to the stored ones

    @property
    def ok(self) -> bool:
        return self.integrity.ok and all(check.ok for check in self.checks)

    @property
    def failures(self) -> list[Check]:
        return self.integrity.failures + [check for check in self.checks if not check.ok]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "comparison": self.comparison,
            "spot": self.spot,
            "environment": self.environment,
            "integrity": [dataclasses.asdict(c) for c in self.integrity.checks],
            "deep": [dataclasses.asdict(c) for c in self.checks],
            "warnings": [dataclasses.asdict(c) for c in self.warnings],
            "thresholds": dataclasses.asdict(self.thresholds),
            "quality": [{**dataclasses.asdict(q), "verdict": q.verdict(self.thresholds)} for q in self.quality],
            **({} if self.exact_id_fraction is None else {"exact_id_fraction": self.exact_id_fraction}),
        }


def spot_indices(num_samples: int, count: int) -> list[int]:
    """`count` dataset indices spread evenly from the first sample to the last (all of them if fewer)."""
    if count < 1:
        raise ConfigError(f"--spot {count}: check at least one sample")
    return sorted({int(i) for i in np.linspace(0, num_samples - 1, min(count, num_samples)).round()})


def verify_deep(root: Path, spot: int = DEFAULT_SPOT, overrides: Overrides = Overrides(),
                thresholds: QualityThresholds = QualityThresholds(), indices: list[int] | None = None,
                require_complete: bool = True, report_path: Path | None = None,
                progress: Progress | None = None) -> DeepReport:
    """Integrity checks, then the deep checks on the spot samples; writes the report as JSON (default
    ROOT/build/verify_report.json). `indices` picks the spot samples instead of spreading `spot` evenly.
    progress(step, samples) is called as each step starts ("sources", "reencode", "frame 0", "quality",
    "prompts") and returns the function advanced by the samples done (a recorded batch at a time for reencode)."""
    root = Path(root)
    check_device_present(overrides.device, "--device")  # before the integrity pass, which can take minutes
    report = DeepReport(integrity=verify_integrity(root, require_complete, progress),
                        environment=environment_record(overrides.device), thresholds=thresholds)
    if report.integrity.ok:
        run_deep_checks(root, spot, overrides, thresholds, indices, report, progress)
    report.path = Path(report_path) if report_path else root / RUN_RECORDS_DIR / VERIFY_REPORT
    with atomic_path(report.path) as tmp:
        tmp.write_text(json.dumps(report.to_json(), indent=2, allow_nan=True), encoding="utf-8")
    return report


def run_deep_checks(root: Path, spot: int, overrides: Overrides, thresholds: QualityThresholds,
                    indices: list[int] | None, report: DeepReport, progress: Progress | None) -> None:
    """The deep checks of one cache whose integrity passed, recorded in `report` (nothing is written)."""
    cache_config = CacheConfig.load(root)
    config = recorded_config(root, overrides)
    rec = CheckRecorder()
    report.checks = rec.report.checks  # one list: what the recorder adds is the report's
    run = DeepChecks(root, config, cache_config, rec, progress)
    num_samples = cache_config.num_samples
    wanted = set(indices) if indices is not None else set(spot_indices(num_samples, spot)) if num_samples else set()
    outside = sorted(i for i in wanted if not 0 <= i < num_samples)
    if outside:
        raise ConfigError(f"spot dataset_index {outside} outside 0..{num_samples - 1}")
    report.spot = sorted(wanted)
    tokenizer = run.load_tokenizer()
    if tokenizer is None or not wanted:
        return
    replay_plans(tokenizer, recorded_plans(cache_config.conv_plans, overrides.device))  # the build's kernels
    spot_rows = manifest_rows(root, lambda row: row.dataset_index in wanted)
    batch_keys = {row.batch_key for row in spot_rows}
    batch_rows = manifest_rows(root, lambda row: row.batch_key in batch_keys)
    finder = SampleFinder(root, config, reread=bool(overrides.dataset))
    pixels = run.load_pixels(batch_rows, finder)
    check_side_streams(rec, spot_rows, pixels, [s.name for s in cache_config.side_streams],
                       lambda row, name: stored_row(root, row, name))
    tolerance = tolerance_for(type(tokenizer).precisions, run.precision, run.latent_dtype)
    autotuned = sorted(k for k in autotuning_keys(type(tokenizer).options_class) if cache_config.tokenizer.get(k))
    comparison = choose_comparison(cache_config.environments, overrides.device, tolerance, autotuned,
                                   run.execution_changes, run.tokens)
    report.comparison = comparison.describe()
    report.exact_id_fraction = run.reencode(tokenizer, batch_rows, pixels, comparison)
    loaded = [row for row in spot_rows if row.dataset_index in pixels]
    if tokenizer.causal:
        run.frame0(tokenizer, loaded, pixels)
    run.quality(tokenizer, loaded, pixels, thresholds, report.quality, report.warnings)
    if cache_config.audio is not None:
        check_audio(rec, loaded, pixels, lambda row, name: stored_row(root, row, name))
        check_audio_latent(rec, loaded, pixels, lambda row, name: stored_row(root, row, name), config,
                           cache_config.audio, tokenizer.device)
    if cache_config.text is not None:
        run.text(spot_rows, report.warnings)
