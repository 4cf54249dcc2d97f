"""Statistics of a cache's conditioning streams for `latentforge stats` (docs/stats.md): per-channel mean and std
of image_cond_latent's latent channels (its mask channels are fixed), and the per-token L2 norm of the image
encoder's tokens. Kept small: enough to see a stream that is zero, saturated or on another scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..cache.conditioning_streams import IMAGE_COND_LATENT, MASK_CHANNELS
from ..cache.config_file import CacheConfig
from ..cache.hdf5_files import reading


def conditioning_stats(root: Path, config: CacheConfig, every: int) -> dict[str, Any] | None:
    """{stream name: its summary} over every `every`-th sample; None for a cache without conditioning streams."""
    if config.conditioning is None or not config.conditioning.streams:
        return None
    sums: dict[str, list[np.ndarray]] = {stream.name: [] for stream in config.conditioning.streams}
    for rel, start, end in config.shard_paths():
        with reading(Path(root) / rel), h5py.File(Path(root) / rel, "r") as shard:
            for row in range(-start % every, end - start, every):
                for name, found in sums.items():
                    found.append(_row_summary(name, shard[name][row].astype(np.float64)))
    return {name: _summary(name, np.stack(found)) for name, found in sums.items() if found}


def _row_summary(name: str, values: np.ndarray) -> np.ndarray:
    """image_cond_latent: [mean_c, mean of squares_c] of its latent channels; tokens: each token's L2 norm."""
    if name == IMAGE_COND_LATENT:
        latent = values[MASK_CHANNELS:].reshape(values.shape[0] - MASK_CHANNELS, -1)
        return np.stack([latent.mean(axis=1), (latent**2).mean(axis=1)])
    return np.linalg.norm(values.reshape(values.shape[0], -1), axis=1)


def _summary(name: str, rows: np.ndarray) -> dict[str, Any]:
    if name == IMAGE_COND_LATENT:  # every row holds equally many values per channel: moments average exactly
        mean, square = rows[:, 0].mean(axis=0), rows[:, 1].mean(axis=0)
        return {"samples": len(rows), "latent_channel_mean": mean.tolist(),
                "latent_channel_std": np.sqrt(np.maximum(square - mean**2, 0.0)).tolist()}
    return {"samples": len(rows), "token_norm_mean": float(rows.mean()), "token_norm_std": float(rows.std()),
            "token_norm_min": float(rows.min()), "token_norm_max": float(rows.max())}
