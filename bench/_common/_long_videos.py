"""Synthetic long videos with shots, for the benches of shot detection and of long-video builds: a panning
pattern with a moving block per shot, a hard cut between shots, and the third cut a 12-frame dissolve (x264,
preset veryfast, crf 23)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

FPS = 30
DISSOLVE = 12  # frames of the dissolve into the fourth shot


def _picture(width: int, height: int, t: int, shot: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    rng = np.random.default_rng(shot)
    tint, phase = rng.integers(50, 200, 3), rng.uniform(0, 6.3, 3)
    rgb = np.stack([tint[c] + 45 * np.sin((x + 2 * t) * 6.3 / width + phase[c]) * np.cos(y * 3 / height)
                    for c in range(3)], -1)
    size = height // 6
    bx = (t * width // 90) % (width - size)
    rgb[height // 3:height // 3 + size, bx:bx + size] = 255 - tint
    return np.clip(rgb, 0, 255).astype(np.uint8)


def synthetic_clip(path: Path, width: int, height: int, seconds: float, shot_seconds: float = 2.0,
                   seed: int = 0) -> tuple[Path, int]:
    """Shots of `shot_seconds`, a hard cut between them, the third cut a dissolve; returns (path, frames).
    `seed` shifts the shots' looks, so videos of other seeds differ."""
    frames = int(seconds * FPS)
    shot_len = int(shot_seconds * FPS)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23"}
        for k in range(frames):
            shot, t = divmod(k, shot_len)
            picture = _picture(width, height, t, seed * 1000 + shot)
            if shot == 2 and t >= shot_len - DISSOLVE:  # dissolve into shot 3
                w = (t - (shot_len - DISSOLVE) + 1) / (DISSOLVE + 1)
                picture = (picture * (1 - w) + _picture(width, height, t, seed * 1000 + shot + 1) * w).astype(np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path, frames
