"""Deep verify: does a cache hold what its sources, tokenizer and text encoder give? (docs/verify.md)

On top of the integrity checks, for N spot samples: re-read the sources at the recorded frame indices,
re-encode each spot sample's recorded batch with the recorded tokenizer and compare with the stored latents,
check latent frame 0 against pixel frame 0 encoded alone, decode the stored latents and measure PSNR/SSIM
per modality, and re-encode the prompts. A tokenizer whose SHA-256 differs from cache_config.json is refused
before any of that runs.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from .. import registry
from ..cache.check_report import Check, CheckRecorder, VerifyReport
from ..cache.config_file import CacheConfig
from ..cache.hdf5_files import reading
from ..cache.layout import RUN_RECORDS_DIR, VERIFY_REPORT
from ..cache.rows import ManifestRow, manifest_rows
from ..cache.text_rows import padded_row
from ..config import BuildConfig
from ..config.option_roles import autotuning_keys
from ..devices import check_device_present
from ..errors import ConfigError, LatentforgeError, SampleRejected
from ..io import atomic_path
from ..pipeline.environment import environment_record
from ..pipeline.kernel_plans import recorded_plans
from ..pipeline.sample import SamplePixels
from ..pipeline.unit import UnitContext, encode_batch
from ..progress import Progress, start_step
from ..sinks.hdf5.integrity import verify_integrity
from ..tokenizers.base import Tokenizer, pixels_to_input
from ..tokenizers.kernel_planning import replay_plans
from .audio_check import check_audio, check_audio_latent
from .conditioning_check import check_streams, close_check, stream_comparisons
from .quality import Quality, QualityThresholds, measure
from .reencode import Overrides, SampleFinder, load_recorded_tokenizer, recorded_config, recorded_pixels
from .side_check import check_side_streams
from .tolerances import Comparison, choose_comparison, equal_id_fraction, tolerance_for

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


def stored_row(root: Path, row: ManifestRow, dataset: str) -> np.ndarray:
    path = Path(root) / row.shard_path
    with reading(path), h5py.File(path, "r") as shard:
        return shard[dataset][row.cache_row]


def _execution_key(key: str, execution: frozenset[str]) -> bool:
    """Fingerprint keys that change software or code path, not the function: they decide exact vs tolerance.
    `execution`: the tokenizer's own (Tokenizer.execution_keys, docs/execution.md)."""
    return key.endswith("_version") or key in execution


def _never_staged(payload: Any) -> None:
    raise LatentforgeError("deep verify re-encodes batches to compare them; it never stages a unit")


class _DeepRun:
    def __init__(self, root: Path, config: BuildConfig, cache_config: CacheConfig, rec: CheckRecorder,
                 progress: Progress | None):
        self.root, self.config, self.cache_config, self.rec, self.progress = root, config, cache_config, rec, progress
        self.storage = config.output.storage_dtype
        self.tokens = cache_config.tokens is not None  # token ids: compared by equal fraction, decoded as integers
        self.latent_dtype = cache_config.latent_dtype
        self.channels = {m.name: m.channels for m in cache_config.latent.modalities}
        self.latent_dataset = cache_config.latent.dataset
        self.streams = () if cache_config.conditioning is None else cache_config.conditioning.names
        self.precision = cache_config.precision
        self.execution_changes: list[str] = []

    def load_tokenizer(self) -> Tokenizer | None:
        """The recorded tokenizer, refused (None) when its SHA-256 or the function it computes differs."""
        recorded = self.cache_config.tokenizer
        try:
            tokenizer = load_recorded_tokenizer(self.config, self.cache_config)
        except ConfigError:
            raise
        except LatentforgeError as error:  # e.g. the checkpoint's SHA-256 is not the recorded one
            self.rec.fail("tokenizer", f"refused: {error}")
            return None
        current = tokenizer.fingerprint()
        execution = type(tokenizer).execution_keys()
        keys = sorted(recorded.keys() | current.keys())
        changed = [f"{k} recorded {recorded.get(k)!r}, now {current.get(k)!r}" for k in keys
                   if recorded.get(k) != current.get(k) and not _execution_key(k, execution)]
        if changed:
            self.rec.fail("tokenizer", "refused: the tokenizer computes another function than the build's: "
                          + "; ".join(changed))
            return None
        self.execution_changes = [f"{k} {recorded.get(k)!r} -> {current.get(k)!r}" for k in keys
                                 if _execution_key(k, execution) and recorded.get(k) != current.get(k)]
        self.rec.close("tokenizer", f"{self.cache_config.tokenizer_name} fingerprint (checkpoint SHA-256 included) "
                       "equals cache_config.json")
        return tokenizer

    def load_pixels(self, rows: list[ManifestRow], finder: SampleFinder) -> dict[int, SamplePixels]:
        pixels = {}
        advance = start_step(self.progress, "sources", len(rows))
        for row in rows:
            index = row.dataset_index
            try:
                pixels[index], differences = recorded_pixels(row, finder.sample(row), self.config)
            except SampleRejected as error:
                self.rec.fail("sources", f"dataset_index {index}: {error.reason}: {error.detail}", index)
            else:
                for difference in differences:
                    self.rec.fail("provenance", f"dataset_index {index}: {difference}", index)
            advance(1)
        self.rec.close("sources", f"{len(rows)} samples' sources re-read at their recorded frame indices")
        self.rec.close("provenance", "recorded window, crop, size, rotation, prompt and modality parameters "
                       "equal what the sources give")
        return pixels

    def reencode(self, tokenizer: Tokenizer, rows: list[ManifestRow], pixels: dict[int, SamplePixels],
                 comparison: Comparison) -> float | None:
        """Compare the re-encoded batches with the stored rows; token caches: the fraction of equal ids."""
        ctx = UnitContext(config=self.config, tokenizer=tokenizer, text=None, stage=_never_staged)
        equal_ids = total_ids = 0
        batches: dict[tuple[int, int], list[ManifestRow]] = {}
        for row in rows:
            batches.setdefault(row.batch_key, []).append(row)
        identical = same_streams = 0
        streams_comparison = stream_comparisons(comparison, type(tokenizer).precisions, self.cache_config)
        advance = start_step(self.progress, "reencode", len(rows))
        for members in batches.values():
            if any(row.dataset_index not in pixels for row in members):
                advance(len(members))
                continue  # a member's sources failed (reported): the batch cannot be reproduced
            fresh, streams = encode_batch([pixels[row.dataset_index] for row in members], ctx)
            for i, (row, latent) in enumerate(zip(members, fresh)):
                same_streams += check_streams(self.rec, row, {name: stored_row(self.root, row, name)
                                                              for name in self.streams},
                                              {name: values[i] for name, values in streams.items()},
                                              streams_comparison)
                stored = stored_row(self.root, row, self.latent_dataset)
                identical += int(np.array_equal(stored, latent))
                if self.tokens:
                    equal, size = equal_id_fraction(stored, latent)
                    equal_ids, total_ids = equal_ids + equal, total_ids + size
                problem = comparison.problem(stored, latent)
                if problem:
                    self.rec.fail("reencode", f"dataset_index {row.dataset_index} (unit {row.unit}, batch "
                                  f"{row.batch}): {problem}", row.dataset_index)
            advance(len(members))
        close_check(self.rec, self.cache_config, len(rows), same_streams)
        fraction = equal_ids / total_ids if total_ids else None
        ids = "" if fraction is None else f", {fraction:.4f} of the token ids equal"
        self.rec.close("reencode", f"{len(rows)} samples in {len(batches)} recorded batches re-encoded ({identical} "
                       f"bit for bit{ids}) and compared as the report's `comparison` says")
        return fraction

    def frame0(self, tokenizer: Tokenizer, rows: list[ManifestRow], pixels: dict[int, SamplePixels]) -> None:
        # Frame 0 alone runs other chunking than the whole clip, so this is a tolerance check even where the
        # re-encode is exact.
        tolerance = tolerance_for(type(tokenizer).precisions, self.precision, self.latent_dtype)
        comparison = Comparison(False, tolerance, "pixel frame 0 encoded alone", self.tokens)
        advance = start_step(self.progress, "frame 0", len(rows))
        for row in rows:
            stored = stored_row(self.root, row, self.latent_dataset)
            for name, frames in pixels[row.dataset_index].modalities.items():
                lo, hi = self.channels[name]
                video = pixels_to_input(frames.head(1), tokenizer.device).unsqueeze(0)
                with torch.inference_mode():
                    alone = tokenizer.encode(video)[0].cpu().numpy().astype(self.latent_dtype)
                problem = comparison.problem(stored[lo:hi, :1], alone)
                if problem:
                    self.rec.fail("latent_frame0", f"dataset_index {row.dataset_index} {name}: latent frame 0 "
                                  f"is not encode(pixel frame 0): {problem}", row.dataset_index)
            advance(1)
        self.rec.close("latent_frame0", f"latent frame 0 equals encode(pixel frame 0) ({comparison.describe()})")

    def quality(self, tokenizer: Tokenizer, rows: list[ManifestRow], pixels: dict[int, SamplePixels],
                thresholds: QualityThresholds, report: DeepReport) -> None:
        advance = start_step(self.progress, "quality", len(rows))
        for row in rows:
            index = row.dataset_index
            stored = stored_row(self.root, row, self.latent_dataset).astype(np.int64 if self.tokens else np.float32)
            for name, frames in pixels[index].modalities.items():
                lo, hi = self.channels[name]
                with torch.inference_mode():
                    decoded = tokenizer.decode(torch.from_numpy(stored[None, lo:hi]).to(tokenizer.device))[0]
                result = measure(index, name, decoded, pixels_to_input(frames, "cpu"))
                report.quality.append(result)
                verdict = result.verdict(thresholds)
                detail = f"{name}: PSNR {result.psnr_db:.2f} dB, SSIM {result.ssim:.4f}"
                if verdict == "fail":
                    self.rec.fail("quality", f"{detail} below PSNR {thresholds.fail_psnr} dB or SSIM "
                                  f"{thresholds.fail_ssim}", index)
                elif verdict == "warn":
                    report.warnings.append(Check("quality", True, f"{detail} below PSNR {thresholds.warn_psnr} dB or "
                                                 f"SSIM {thresholds.warn_ssim}", index))
            advance(1)
        self.rec.close("quality", f"decoded PSNR/SSIM of {len(rows)} samples above the fail thresholds")

    def text(self, rows: list[ManifestRow], report: DeepReport) -> None:
        recorded = self.cache_config.text
        path = self.config.text.path
        if not path or not Path(path).is_dir():
            report.warnings.append(Check("text_reencode", True, f"not run: text model folder {path!r} not found; "
                                         "pass it with --text-path to re-encode the prompts"))
            return
        encoder = registry.resolve("text", self.config.text.name).from_config(self.config.text, self.config.run.device)
        current = encoder.fingerprint()
        changed = [f"{k} recorded {recorded.details[k]!r}, now {current.get(k)!r}"
                   for k in ("weights_sha256", "tokenizer_sha256", "model_class")
                   if k in recorded.details and recorded.details[k] != current.get(k)]
        if changed:
            self.rec.fail("text_encoder", "refused: " + "; ".join(changed))
            return
        self.rec.close("text_encoder", "text encoder weights and tokenizer SHA-256 equal cache_config.json")
        tolerance = tolerance_for(type(encoder).precisions, self.config.text.precision, self.storage)
        comparison = Comparison(False, tolerance, "re-encoded here: the device's kernels or software may differ "
                                "from the build's")
        advance = start_step(self.progress, "prompts", len(rows))
        encoded = encoder.encode([row.prompt for row in rows])
        for row, fresh, length in zip(rows, encoded.embeddings, encoded.lengths):
            index = row.dataset_index
            with reading(self.root / row.shard_path), h5py.File(self.root / row.shard_path, "r") as shard:
                stored, stored_length = padded_row(shard, recorded.embeddings_dataset, recorded.length_dataset,
                                                   row.cache_row, recorded.max_length, recorded.dim)
            if stored_length != int(length):
                self.rec.fail("text_reencode", f"dataset_index {index}: stored length {stored_length}, the prompt "
                              f"encodes to {int(length)} tokens", index)
            elif np.any(fresh[int(length):]):
                self.rec.fail("text_reencode", f"dataset_index {index}: the re-encoded rows past length {length} "
                              "are not zero", index)
            elif problem := comparison.problem(stored, fresh.astype(self.storage)):
                self.rec.fail("text_reencode", f"dataset_index {index}: {problem}", index)
            advance(1)
        self.rec.close("text_reencode", f"{len(rows)} prompts re-encoded: lengths equal, rows past the length zero, "
                       f"rel-L2 <= {comparison.tolerance:.3g}")


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
    run = _DeepRun(root, config, cache_config, rec, progress)
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
    run.quality(tokenizer, loaded, pixels, thresholds, report)
    if cache_config.audio is not None:
        check_audio(rec, loaded, pixels, lambda row, name: stored_row(root, row, name))
        check_audio_latent(rec, loaded, pixels, lambda row, name: stored_row(root, row, name), config,
                           cache_config.audio, tokenizer.device)
    if cache_config.text is not None:
        run.text(spot_rows, report)
