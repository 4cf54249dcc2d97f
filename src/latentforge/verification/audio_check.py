"""Deep verify of a cache's sound (audio.enabled, docs/audio.md): each spot sample's window decoded again from its
video's start and compared with the stored rows bit for bit, its manifest record with the fresh one; with an audio
tokenizer, the fresh PCM encoded again and compared with the stored audio latent."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..cache.audio_section import AUDIO, AUDIO_LATENT, AUDIO_LENGTH, AUDIO_SPAN, AudioSection
from ..cache.check_report import CheckRecorder
from ..cache.rows import ManifestRow
from ..config import BuildConfig
from ..pipeline.audio_latent import audio_latent_stream, encode_audio_rows, load_audio_tokenizer
from ..pipeline.sample import SamplePixels

CHECK = "audio"
LATENT_CHECK = "audio_latent"

Stored = Callable[[ManifestRow, str], np.ndarray]


def check_audio(rec: CheckRecorder, rows: list[ManifestRow], pixels: dict[int, SamplePixels], stored: Stored) -> None:
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


def check_audio_latent(rec: CheckRecorder, rows: list[ManifestRow], pixels: dict[int, SamplePixels], stored: Stored,
                       config: BuildConfig, section: AudioSection, device: torch.device) -> None:
    """With an audio latent stored: the recorded audio tokenizer (its fingerprint, SHA-256 included, equal to the
    recorded one) encodes each spot row's fresh PCM; fp32 must equal the stored latent, bf16 within its tolerance."""
    recorded = section.latent
    if recorded is None:
        return
    current = audio_latent_stream(config, section.samples)
    if current is None or current.producer != recorded.producer:
        now = {} if current is None else current.producer
        changed = sorted(k for k in recorded.producer.keys() | now.keys() if recorded.producer.get(k) != now.get(k))
        rec.fail(LATENT_CHECK, "refused: the audio tokenizer computes another function than the build's "
                 f"({', '.join(changed)} differ from cache_config.json)")
        return
    tokenizer = load_audio_tokenizer(config, device)
    tolerance = type(tokenizer).precisions[config.audio.precision]
    fresh = encode_audio_rows(tokenizer, np.stack([pixels[row.dataset_index].audio[AUDIO] for row in rows])) \
        if rows else []
    for row, latent in zip(rows, fresh):
        saved = stored(row, AUDIO_LATENT)
        if saved.shape != latent.shape:
            rec.fail(LATENT_CHECK, f"dataset_index {row.dataset_index}: stored {list(saved.shape)}, re-encoded "
                     f"{list(latent.shape)}", row.dataset_index)
            continue
        difference = float(np.abs(saved - latent).max()) if saved.size else 0.0
        allowed = tolerance * max(1.0, float(np.abs(saved).max()) if saved.size else 0.0)
        if difference > allowed or (tolerance == 0.0 and not np.array_equal(saved, latent)):
            rec.fail(LATENT_CHECK, f"dataset_index {row.dataset_index}: the audio latent differs from the re-encode "
                     f"by up to {difference:.3g} (allowed {allowed:.3g})", row.dataset_index)
    exact = "bit for bit" if tolerance == 0.0 else f"within {tolerance:g} of the largest value"
    rec.close(LATENT_CHECK, f"{len(rows)} samples' sound encoded again by {config.audio.tokenizer}, equal {exact} "
              "to the stored audio latent")
