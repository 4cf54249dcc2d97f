"""A generated long video with shots: textured scenes that move, hard cuts and dissolves at known frames (PyAV
writes it; nothing of latentforge makes the pictures)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from helpers.media import write_video


def scene_frames(num_frames: int, width: int, height: int, seed: int) -> np.ndarray:
    """uint8 [T, H, W, 3]: a broad pattern of the shot's own colours panning 1 px a frame, with a block moving
    2 px a frame across it: steady motion inside a shot, nothing a detector should call a cut."""
    rng = np.random.default_rng(seed)
    tint = rng.integers(50, 200, 3).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, 3)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    frames = np.empty((num_frames, height, width, 3), np.uint8)
    for t in range(num_frames):
        frame = np.stack([tint[c] + 45 * np.sin((x + t) * 2 * np.pi / width + phase[c]) * np.cos(y / height * 3)
                          for c in range(3)], axis=-1)
        bx = (2 * t + seed * 11) % max(1, width - 10)
        frame[height // 3:height // 3 + 10, bx:bx + 10] = 255 - tint
        frames[t] = np.clip(frame, 0, 255).astype(np.uint8)
    return frames


def dissolve(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Blend the last len(after) frames of one shot into the first of the next: frame i is (i + 1) / (L + 1) of
    the new one."""
    length = len(after)
    weights = (np.arange(1, length + 1, dtype=np.float32) / (length + 1))[:, None, None, None]
    return (before.astype(np.float32) * (1 - weights) + after.astype(np.float32) * weights).round().astype(np.uint8)


def write_shots(path: Path, lengths: list[int], dissolves: dict[int, int] | None = None, width: int = 64,
                height: int = 48, fps: int = 24, seed: int = 0) -> tuple[Path, list[int], list[tuple[int, int]]]:
    """A video of shots of `lengths` frames; dissolves {k: L} blends shot k into shot k + 1 over L frames (the
    last L frames of shot k with the first L of shot k + 1, so the video is sum(lengths) - sum(L) frames long).
    Returns the path, the hard cut frames (first frame of the new shot) and each dissolve's mixed frames
    (first, last)."""
    dissolves = dissolves or {}
    shots = [scene_frames(n, width, height, seed * 100 + k + 1) for k, n in enumerate(lengths)]
    parts, cuts, blends, at, carry = [], [], [], 0, 0
    for k, shot in enumerate(shots):
        shot = shot[carry:]
        blend = dissolves.get(k)
        if blend is None:
            parts.append(shot)
            at += len(shot)
            if k + 1 < len(shots):
                cuts.append(at)
            carry = 0
        else:
            parts += [shot[:-blend], dissolve(shot[-blend:], shots[k + 1][:blend])]
            blends.append((at + len(shot) - blend, at + len(shot) - 1))
            at += len(shot)
            carry = blend
    write_video(path, np.concatenate(parts), fps=fps)
    return path, cuts, blends
