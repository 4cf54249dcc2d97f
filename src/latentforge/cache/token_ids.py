"""Token-id rows of a discrete tokenizer's cache (cache_config.json `latent.tokens`): the range check both sinks'
integrity verify runs, and the flattening the training Datasets offer to sequence models."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import numpy as np

from ..errors import ConfigError
from .config_file import CacheConfig

Ids = TypeVar("Ids")  # a numpy array or a torch tensor: both reshape alike


def id_range_problem(ids: np.ndarray, vocabulary: int) -> str | None:
    """Why a row of stored ids is not valid (an id at or past the vocabulary), or None."""
    if ids.size and int(ids.max()) >= vocabulary:
        bad = np.flatnonzero(ids.reshape(-1) >= vocabulary)
        position = np.unravel_index(int(bad[0]), ids.shape)
        return (f"{len(bad)} token id(s) >= the vocabulary {vocabulary}, the first {int(ids[position])} at "
                f"[modality, t, h, w] = {[int(p) for p in position]}")
    return None



def raster_sequence(ids: Ids) -> Ids:
    """[..., T', H', W'] ids -> [..., T'*H'*W'] in (t, h, w) raster order: w fastest, then h, then t."""
    return ids.reshape(*ids.shape[:-3], -1)  # type: ignore[attr-defined]


def check_flatten_tokens(root: str | Path, config: CacheConfig, flatten_tokens: bool) -> None:
    """flatten_tokens=True is for token ids; a float-latent cache has none to flatten."""
    if flatten_tokens and config.tokens is None:
        raise ConfigError(f"flatten_tokens=True, but {root} holds float latents of {config.tokenizer_name}, not "
                          "token ids; build with a discrete tokenizer (cosmos-dv*) or leave flatten_tokens off")
