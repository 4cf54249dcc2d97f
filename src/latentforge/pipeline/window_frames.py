"""A few of a window's frames as a viewer sees them, for the passes that look at windows before any unit: the
caption pass (pipeline/captions.py) and near-duplicate removal (pipeline/dedup.py); and the digest that names what
such a pass records for a window."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

import numpy as np

from ..config import BuildConfig
from ..decode.pyav import decode_rgb
from ..decode.resize import plan_resize
from ..errors import rejected_if_unexpected
from ..io import canonical_json
from ..records import Sample
from .probe import ProbeResult


def sampled_indices(window: list[int] | tuple[int, ...], count: int) -> list[int]:
    """`count` of the window's source frame indices, evenly spread from its first to its last (all of them when the
    window has no more); one frame: the middle one."""
    n = len(window)
    if count >= n:
        return list(window)
    if count == 1:
        return [window[n // 2]]
    return [window[(2 * i * (n - 1) + count - 1) // (2 * (count - 1))] for i in range(count)]


def window_frames(sample: Sample, probe: ProbeResult, config: BuildConfig, indices: list[int], short_side: int,
                  purpose: str) -> np.ndarray:
    """uint8 [F, h, w, 3]: the frames `indices` upright as a player shows them, the short side resized to
    `short_side` (swscale, bicubic, on the CPU: the same frames whatever the cache's own frame settings). A frame
    that does not decode rejects the sample as decode_error, naming `purpose`."""
    info = probe.info
    coded = info.coded_size(indices[0])
    width, height = info.display_of(coded)
    scale = short_side / min(width, height)
    out_w, out_h = max(1, round(width * scale)), max(1, round(height * scale))
    plan = plan_resize(width, height, out_w, out_h, "stretch", stored=info.upright_of(coded))
    frames = dataclasses.replace(config.frames, resize_backend="swscale", resize_filter="bicubic", decoder="cpu")
    with rejected_if_unexpected("decode_error", sample.sample_id, sample.entry.video, f"decoding frames {purpose}",
                                "re-encode the source"):
        return decode_rgb(sample.entry.video, info, indices, plan, frames, sample.sample_id,
                          threads=config.run.decode_threads)


def window_record_key(video: str, frame_indices: list[int], recipe: dict[str, Any], record_format: int) -> str | None:
    """The digest naming what a pass records for a window: the video (path, size, mtime), the frames it looks at,
    the pass's recipe and its record format; None when the video cannot be read (the decode says why)."""
    try:
        status = os.stat(video)
    except OSError:
        return None
    identity = {"format": record_format, "video": os.path.abspath(video), "size": status.st_size,
                "mtime_ns": status.st_mtime_ns, "frames": list(frame_indices), "recipe": recipe}
    return hashlib.sha256(canonical_json(identity).encode("utf-8")).hexdigest()
