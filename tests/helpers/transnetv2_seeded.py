"""Seeded stand-ins for TransNetV2's weights and input, made the same way by the script that recorded the upstream
reference (tests/decode/fixtures/make_transnetv2_reference.py) and by the tests that compare our module with it.

The real weights (converted from the official TensorFlow release) cannot be downloaded here; seeded weights of the
same shapes exercise every layer, which is what a comparison of two implementations needs."""

from __future__ import annotations

import math

import numpy as np
import torch

SEED = 0
REFERENCE_FRAMES = 137  # not a multiple of 50: the last window is padded with more copies than the first


def seeded_state_dict(template: dict[str, torch.Tensor], seed: int = SEED) -> dict[str, torch.Tensor]:
    """Tensors of `template`'s keys and shapes from one torch.Generator seeded with `seed`, drawn key by key in
    sorted order: weights randn / sqrt(fan_in), batch-norm scales 1 + 0.1 randn, variances 0.5 + |randn|, other
    vectors 0.1 randn, num_batches_tracked 0 (it draws nothing)."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key in sorted(template):
        like = template[key]
        if key.endswith("num_batches_tracked"):
            state[key] = torch.zeros_like(like)
            continue
        noise = torch.randn(tuple(like.shape), generator=generator, dtype=torch.float32)
        if key.endswith("running_var"):
            state[key] = 0.5 + noise.abs()
        elif key.endswith("bn.weight"):
            state[key] = 1 + 0.1 * noise
        elif like.ndim == 1:
            state[key] = 0.1 * noise
        else:
            state[key] = noise / math.sqrt(like[0].numel())
    return state


def reference_frames(count: int = REFERENCE_FRAMES, seed: int = SEED) -> np.ndarray:
    """uint8 [count, 27, 48, 3] RGB frames of seeded noise."""
    return np.random.default_rng(seed).integers(0, 256, (count, 27, 48, 3), dtype=np.uint8)
