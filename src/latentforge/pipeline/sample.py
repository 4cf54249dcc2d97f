"""Decode and transform one probed sample into the arrays the tokenizer encodes (runs in CPU workers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import BuildConfig
from ..decode.modality_frames import ModalityFrames
from ..decode.nvdec import with_nvdec
from ..decode.pyav import decode_rgb
from ..decode.yuv_capture import decode_yuv
from ..records import Sample
from ..transforms.depth import load_depth
from ..transforms.masks import load_mask
from .probe import ProbeResult


@dataclass
class SamplePixels:
    """Decoded, transformed frames of every modality of a sample, ready for the tokenizer."""

    sample: Sample
    modalities: dict[str, ModalityFrames]
    provenance: dict[str, Any]  # frame indices, timestamps, source fps and size, crop box, per-modality params


def provenance_of(probe: ProbeResult) -> dict[str, Any]:
    """The manifest's window/provenance fields (docs/cache-format.md); JSON-serialisable."""
    width, height = probe.info.display_size
    provenance = {
        "frame_indices": list(probe.window.indices),
        "timestamps": list(probe.window.timestamps),
        "source_fps": probe.info.fps,
        "source_size": [width, height],
        "rotation": probe.info.rotation,
        "crop_box": [round(v, 6) for v in probe.plan.source_crop],
    }
    if probe.info.sample_aspect_ratio != (1, 1):  # only then: rows of square-pixel sources keep their bytes
        provenance["sample_aspect_ratio"] = list(probe.info.sample_aspect_ratio)
    if probe.bucket is not None:
        provenance["bucket"] = probe.bucket
    return provenance


def decode_video(sample: Sample, probe: ProbeResult, config: BuildConfig) -> tuple[ModalityFrames, str | None]:
    """The RGB modality's compact frames (YUV planes for frames.resize_backend=device), and with frames.decoder=nvdec
    the decoder that ran (None for the CPU decoder)."""
    args = (sample.entry.video, probe.info, list(probe.window.indices), probe.plan, config.frames, sample.sample_id)
    threads = config.run.decode_threads

    def decode(hwaccel) -> ModalityFrames:
        if config.frames.resize_backend == "device":
            return decode_yuv(*args, hwaccel=hwaccel, threads=threads)
        return ModalityFrames(decode_rgb(*args, hwaccel=hwaccel, threads=threads))

    if config.frames.decoder == "nvdec":
        return with_nvdec(decode, config.frames, sample.entry.video, sample.sample_id)
    return decode(None), None


def load_sample_pixels(sample: Sample, probe: ProbeResult, config: BuildConfig) -> SamplePixels:
    """Every modality in config.modalities.names order, all on the same source frame indices."""
    indices = list(probe.window.indices)
    modalities: dict[str, ModalityFrames] = {}
    provenance = provenance_of(probe)
    for name in config.modalities.names:
        if name == "rgb":
            modalities["rgb"], decoder = decode_video(sample, probe, config)
            if decoder is not None:
                provenance["decoder"] = decoder
            if config.frames.resize_backend == "device":
                provenance["resize_backend"] = "device"
        elif name == "mask":
            modalities["mask"], provenance["mask"] = load_mask(
                probe.modality_info["mask"], indices, probe.plan, config.modalities.mask, sample.sample_id
            )
        else:
            modalities["depth"], provenance["depth"] = load_depth(
                probe.modality_info["depth"], indices, probe.plan, config.modalities.depth, sample.sample_id
            )
    return SamplePixels(sample=sample, modalities=modalities, provenance=provenance)
