"""Batching LatentCacheDataset items, and caption dropout with the cache's own empty-prompt embedding."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch.utils.data import get_worker_info

from ..errors import ConfigError


def collate_latent_batch(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Stack tensors, turn ints into an int64 tensor and keep strings (and anything else) as lists.

    Items must share their keys and tensor shapes; a cache guarantees that, mixing caches does not.
    """
    if not items:
        raise ConfigError("collate_latent_batch got an empty batch")
    keys = list(items[0])
    batch: dict[str, Any] = {}
    for key in keys:
        values = [item[key] for item in items]
        first = values[0]
        if isinstance(first, torch.Tensor):
            shapes = {tuple(v.shape) for v in values}
            if len(shapes) != 1:
                raise ConfigError(f"cannot batch {key!r}: items have shapes {sorted(shapes)}; use one cache per batch")
            batch[key] = _rows_of_one_tensor(values)
            if batch[key] is None:
                batch[key] = _stack(values)
        elif isinstance(first, int) and not isinstance(first, bool):
            batch[key] = torch.tensor(values, dtype=torch.int64)
        elif isinstance(first, float):
            batch[key] = torch.tensor(values, dtype=torch.float64)
        else:
            batch[key] = values
    return batch


def _rows_of_one_tensor(values: list[torch.Tensor]) -> torch.Tensor | None:
    """The batch buffer itself when `values` are its rows in order (LatentCacheDataset.__getitems__), else None."""
    base = values[0]._base
    if base is None or base.shape[0] != len(values) or not base.is_contiguous():
        return None
    for row, value in enumerate(values):
        if value._base is not base or value.shape != base.shape[1:] or value.data_ptr() != base[row].data_ptr():
            return None
    return base


def _stack(values: list[torch.Tensor]) -> torch.Tensor:
    if get_worker_info() is None:
        return torch.stack(values)
    # In a worker, stack straight into shared memory, or sending the batch would copy it there (default_collate).
    first = values[0]
    storage = first.untyped_storage()._new_shared(len(values) * first.numel() * first.element_size())
    out = torch.empty(0, dtype=first.dtype).set_(storage, 0, (len(values), *first.shape))
    return torch.stack(values, out=out)


def drop_captions(
    batch: dict[str, Any],
    empty_prompt: dict[str, torch.Tensor],
    rate: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Replace each row's text with the empty prompt with probability `rate`, in place; return the bool mask.

    The empty prompt comes from `LatentCacheDataset.empty_prompt()`: the same encoder, precision and storage
    dtype as the cached captions, so a dropped caption looks exactly like one encoded at inference.
    """
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"caption dropout rate={rate} must be within [0, 1]")
    embeddings = batch["text_embeddings"]
    dropped = torch.rand(embeddings.shape[0], generator=generator) < rate
    if dropped.any():
        rows = dropped.nonzero().flatten()
        for key in ("text_embeddings", "text_length", "text_mask"):
            replacement = empty_prompt[key].to(batch[key].device, batch[key].dtype)
            batch[key][rows.to(batch[key].device)] = replacement
    return dropped
