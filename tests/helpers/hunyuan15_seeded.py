"""Seeded weights for the tiny HunyuanVideo 1.5 VAE of tests/tokenizers/fixtures/hunyuanvideo15_official_tiny.*,
drawn the same way by the script that ran the official module (bench/tools/hunyuanvideo15_reference_fixture.py)
and by the test that loads them through latentforge (tests/tokenizers/test_hunyuan_official_checkpoints.py).

Five million weights are too many to ship; their names and shapes (the official module's, recorded in the
fixture) and this rule are enough to make them again, bit for bit."""

from __future__ import annotations

import math

import torch


def seeded_weights(shapes: dict[str, list[int]], seed: int) -> dict[str, torch.Tensor]:
    """float32 tensors of these names and shapes from one torch.Generator seeded with `seed`, drawn name by name in
    sorted order: RMS-norm gains (`gamma`) 1 + 0.2 N, biases 0.1 N, other weights N / sqrt(fan_in)."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name in sorted(shapes):
        shape = tuple(shapes[name])
        noise = torch.randn(shape, generator=generator, dtype=torch.float32)
        if name.endswith("gamma"):
            state[name] = 1 + 0.2 * noise
        elif name.endswith("bias"):
            state[name] = 0.1 * noise
        else:
            state[name] = noise / math.sqrt(math.prod(shape[1:]))
    return state


def pixels(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """uint8 noise of `shape` from `torch.Generator(seed)`."""
    return torch.randint(0, 256, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)


def to_input(pixels_uint8: torch.Tensor) -> torch.Tensor:
    """uint8 v -> v / 127.5 - 1 in float64, then float32: a clip in [-1, 1]."""
    return pixels_uint8.double().div(127.5).sub(1.0).float()
