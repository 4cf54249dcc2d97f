"""Mask ids -> palette colours (docs/modalities.md): nearest-neighbour on the sample's plan, then a
documented colour per id so the RGB tokenizer can encode masks like video."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch

from ..config import MaskConfig
from ..decode.modality_frames import ModalityFrames
from ..decode.resize import NearestClip, ResizeGeometry
from ..decode.sources import ModalitySource, iter_source_frames
from ..errors import ConfigError, SampleRejected

# Fibonacci hashing: floor(2^24 / golden ratio), odd, so id -> id * GOLDEN_24 mod 2^24 is a bijection and
# no two ids below 2^24 share a colour; consecutive ids land far apart in RGB.
GOLDEN_24 = 0x9E3779
PALETTES = ("golden",)


def palette_colours(ids: np.ndarray, palette: str = "golden") -> np.ndarray:
    """uint8 [..., 3] colour of every id: c = id * 0x9E3779 mod 2^24, R = c >> 16, G = (c >> 8) & 255,
    B = c & 255. Id 0 is black."""
    if palette not in PALETTES:
        raise ConfigError(f"modalities.mask.palette={palette!r}; allowed: {', '.join(PALETTES)}")
    code = (ids.astype(np.uint64) * np.uint64(GOLDEN_24)) % np.uint64(1 << 24)
    return np.stack([code >> np.uint64(16), (code >> np.uint64(8)) & np.uint64(255), code & np.uint64(255)], -1).astype(
        np.uint8
    )


def _colour(ids: np.ndarray, palette: str) -> ModalityFrames:
    """palette_colours for a whole mask: 8/16-bit ids travel as they are with the table of every id's colour
    (the encoder's device does the gather), other ids are coloured here."""
    if ids.dtype in (np.uint8, np.uint16):
        table = palette_colours(np.arange(np.iinfo(ids.dtype).max + 1, dtype=np.uint32), palette)
        return ModalityFrames(ids, table)
    return ModalityFrames(palette_colours(ids, palette))


def _present_ids(ids: np.ndarray) -> np.ndarray:
    """Sorted distinct ids; a histogram for 8/16-bit masks (linear) instead of a sort. numpy's bincount widens
    every id to int64 first (8 bytes per pixel of a whole clip), so 8-bit ids count in torch, which does not,
    and 16-bit ids (which torch cannot count) one frame at a time."""
    if ids.dtype == np.uint8:
        return np.flatnonzero(torch.bincount(torch.from_numpy(ids).reshape(-1), minlength=1).numpy())
    if ids.dtype == np.uint16:
        seen = np.zeros(1 << 16, dtype=bool)
        for frame in ids:
            seen[np.flatnonzero(np.bincount(frame.ravel(), minlength=1))] = True
        return np.flatnonzero(seen)
    return np.unique(ids)


def _undeclared_ids(codes: np.ndarray, declared: np.ndarray) -> list[int]:
    """Sorted ids of `codes` outside `declared` (sorted, distinct). A frame whose min..max run is all declared
    (the usual 0..N id set) holds none, which two reductions prove without counting its ids."""
    lo, hi = int(codes.min()), int(codes.max())
    if np.searchsorted(declared, hi, "right") - np.searchsorted(declared, lo, "left") == hi - lo + 1:
        return []
    present = _present_ids(codes)
    return present[~np.isin(present, declared)].tolist()


def load_mask(
    source: ModalitySource, indices: list[int], plan: ResizeGeometry, mask_cfg: MaskConfig, sample_id: str,
    from_start: bool = False,
) -> tuple[ModalityFrames, dict[str, Any]]:
    """The palette colours of the source frames `indices` ([T, out_h, out_w] ids with their palette, or uint8
    [T, out_h, out_w, 3] colours), and the row's params. Declared ids are checked on the whole source frame,
    not only the kept pixels. from_start: a video source is decoded from its start, never seeking."""
    clip = NearestClip(plan, indices)
    declared = None if mask_cfg.ids is None else np.unique(np.asarray(mask_cfg.ids))
    undeclared: set[int] = set()
    for index, codes in iter_source_frames(source, indices, sample_id, from_start):
        if declared is not None:
            undeclared.update(_undeclared_ids(codes, declared))
        clip.add(index, codes)
    if undeclared:
        raise SampleRejected(
            "mask_id_out_of_range",
            sample_id,
            f"mask {source.path} holds ids {sorted(undeclared)[:8]} outside modalities.mask.ids "
            f"{sorted(mask_cfg.ids)[:16]}; declare them or fix the mask",
        )
    kept = cast(np.ndarray, clip.values)  # a source has at least one frame
    params = {
        "source_kind": source.kind,
        "bit_depth": source.bit_depth,
        "palette": mask_cfg.palette,
        "ids": _present_ids(kept).tolist(),
    }
    return _colour(kept, mask_cfg.palette), params
