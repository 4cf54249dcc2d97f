"""Decode and transform one probed sample into the arrays the tokenizer encodes (runs in CPU workers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import BuildConfig
from ..decode.modality_frames import ModalityFrames
from ..decode.nvdec import with_nvdec
from ..decode.pyav import decode_rgb
from ..decode.yuv_capture import decode_yuv
from ..errors import rejected_if_unexpected
from ..records import Sample
from ..transforms.depth import load_depth
from ..transforms.masks import load_mask
from .audio_window import load_sound
from .probe import ProbeResult
from .side_streams import load_side_values, side_provenance


@dataclass
class SamplePixels:
    """Decoded, transformed frames of every modality of a sample, ready for the tokenizer."""

    sample: Sample
    modalities: dict[str, ModalityFrames]
    provenance: dict[str, Any]  # frame indices, timestamps, source fps and size, crop box, per-modality params
    side: dict[str, np.ndarray] = field(default_factory=dict)  # per-frame side streams: float32 [T, D] each
    audio: dict[str, np.ndarray] = field(default_factory=dict)  # audio.enabled: the window's sound (docs/audio.md)


def provenance_of(probe: ProbeResult) -> dict[str, Any]:
    """The manifest's window/provenance fields (docs/cache-format.md); JSON-serialisable."""
    width, height = probe.info.display_of(probe.info.coded_size(probe.window.indices[0]))
    provenance = {
        "frame_indices": list(probe.window.indices),
        "timestamps": list(probe.window.timestamps),
        "source_fps": probe.info.fps,
        "source_size": [width, height],
        "rotation": probe.info.rotation,
        "crop_box": [round(v, 6) for v in probe.plan.source_crop],
    }
    # Only when there is something to say, so the rows of ordinary sources keep their bytes
    if probe.info.sample_aspect_ratio != (1, 1):
        provenance["sample_aspect_ratio"] = list(probe.info.sample_aspect_ratio)
    if probe.info.vfr:  # only when true, so the rows of constant-rate sources keep their bytes
        provenance["vfr"] = True
    if probe.info.notes:
        provenance["source_notes"] = list(probe.info.notes)
    if probe.bucket is not None:
        provenance["bucket"] = probe.bucket
    if probe.segment is not None:  # segments: the shot or table segment, and the window's quality scores
        provenance["segment"] = {k: v for k, v in probe.segment.items() if k != "quality"}
        provenance["quality"] = probe.segment["quality"]
    if probe.caption_provenance is not None:  # a caption the captioner wrote (pipeline/captions.py)
        provenance["caption"] = probe.caption_provenance
    return provenance


def decode_video(sample: Sample, probe: ProbeResult, config: BuildConfig, from_start: bool = False
                 ) -> tuple[ModalityFrames, str | None]:
    """The RGB modality's compact frames (YUV planes for frames.resize_backend=device), and with frames.decoder=nvdec
    the decoder that ran (None for the CPU decoder)."""
    args = (sample.entry.video, probe.info, list(probe.window.indices), probe.plan, config.frames, sample.sample_id)
    threads = config.run.decode_threads

    def decode(hwaccel) -> ModalityFrames:
        if config.frames.resize_backend == "device":
            return decode_yuv(*args, hwaccel=hwaccel, threads=threads, from_start=from_start)
        return ModalityFrames(decode_rgb(*args, hwaccel=hwaccel, threads=threads, from_start=from_start))

    if config.frames.decoder == "nvdec":
        return with_nvdec(decode, config.frames, sample.entry.video, sample.sample_id)
    return decode(None), None


def load_sample_pixels(sample: Sample, probe: ProbeResult, config: BuildConfig, from_start: bool = False
                       ) -> SamplePixels:
    """Every modality in config.modalities.names order, all on the same source frame indices, or for a mask or
    depth source at another rate on the frames shown at the window's times (pipeline/modality_times.py).
    from_start: decode every video from its start, never seeking (what a verify does, so it shares no seek with
    the build). Any
    failure is this sample's reject: an unexpected one becomes decode_error naming it, so one bad file never
    ends a build."""
    with rejected_if_unexpected("decode_error", sample.sample_id, sample.entry.video, "decoding it",
                                "re-encode the source"):
        return _load(sample, probe, config, from_start)


def _load(sample: Sample, probe: ProbeResult, config: BuildConfig, from_start: bool) -> SamplePixels:
    indices = list(probe.window.indices)
    modalities: dict[str, ModalityFrames] = {}
    provenance = provenance_of(probe)
    for name in config.modalities.names:
        if name == "rgb":
            modalities["rgb"], decoder = decode_video(sample, probe, config, from_start)
            if decoder is not None:
                provenance["decoder"] = decoder
            if config.frames.resize_backend == "device":
                provenance["resize_backend"] = "device"
        else:
            load = load_mask if name == "mask" else load_depth
            timed = probe.timed.get(name)
            modalities[name], provenance[name] = load(
                probe.modality_info[name], indices if timed is None else list(timed.indices), probe.plan,
                getattr(config.modalities, name), sample.sample_id, from_start)
            if timed is not None:  # only then, so rows of sources matched by index keep their bytes
                provenance[name].update(frame_indices=list(timed.indices), fps=timed.fps)
    side = load_side_values(probe.side, sample.sample_id)
    if probe.side:  # only then, so rows without side streams keep their bytes
        provenance["side"] = side_provenance(probe.side)
    audio: dict[str, np.ndarray] = {}
    if config.audio.enabled:  # only then, so rows without sound keep their bytes
        audio, provenance["audio"] = load_sound(sample, probe.info, probe.window, config, from_start)
    return SamplePixels(sample=sample, modalities=modalities, provenance=provenance, side=side, audio=audio)
