"""The deep checks of one cache's spot samples (docs/verify.md), a step at a time: the recorded tokenizer loaded
or refused, the sources re-read at the recorded frame indices, the recorded batches re-encoded and compared with
the stored rows, latent frame 0 against pixel frame 0 encoded alone, the decoded PSNR/SSIM, the prompts
re-encoded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from .. import registry
from ..cache.check_report import Check, CheckRecorder
from ..cache.config_file import CacheConfig
from ..cache.hdf5_files import reading
from ..cache.rows import ManifestRow
from ..cache.text_rows import padded_row
from ..config import BuildConfig
from ..errors import ConfigError, LatentforgeError, SampleRejected
from ..pipeline.sample import SamplePixels
from ..pipeline.unit import UnitContext, encode_batch
from ..progress import Progress, start_step
from ..tokenizers.base import Tokenizer, pixels_to_input
from .conditioning_check import check_streams, close_check, stream_comparisons
from .quality import Quality, QualityThresholds, measure
from .reencode import SampleFinder, load_recorded_tokenizer, recorded_pixels
from .tolerances import Comparison, equal_id_fraction, tolerance_for


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


class DeepChecks:
    """The deep checks of one cache's spot samples, a step at a time; each records its failures in `rec`."""

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
                thresholds: QualityThresholds, results: list[Quality], warnings: list[Check]) -> None:
        advance = start_step(self.progress, "quality", len(rows))
        for row in rows:
            index = row.dataset_index
            stored = stored_row(self.root, row, self.latent_dataset).astype(np.int64 if self.tokens else np.float32)
            for name, frames in pixels[index].modalities.items():
                lo, hi = self.channels[name]
                with torch.inference_mode():
                    decoded = tokenizer.decode(torch.from_numpy(stored[None, lo:hi]).to(tokenizer.device))[0]
                result = measure(index, name, decoded, pixels_to_input(frames, "cpu"))
                results.append(result)
                verdict = result.verdict(thresholds)
                detail = f"{name}: PSNR {result.psnr_db:.2f} dB, SSIM {result.ssim:.4f}"
                if verdict == "fail":
                    self.rec.fail("quality", f"{detail} below PSNR {thresholds.fail_psnr} dB or SSIM "
                                  f"{thresholds.fail_ssim}", index)
                elif verdict == "warn":
                    warnings.append(Check("quality", True, f"{detail} below PSNR {thresholds.warn_psnr} dB or "
                                          f"SSIM {thresholds.warn_ssim}", index))
            advance(1)
        self.rec.close("quality", f"decoded PSNR/SSIM of {len(rows)} samples above the fail thresholds")

    def text(self, rows: list[ManifestRow], warnings: list[Check]) -> None:
        recorded = self.cache_config.text
        path = self.config.text.path
        if not path or not Path(path).is_dir():
            warnings.append(Check("text_reencode", True, f"not run: text model folder {path!r} not found; "
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
