"""The bf16 fast path (tokenizers/wan/fast_encoder.py, through the wan2.1 and wan2.2 tokenizers and their loading code)
against diffusers' fp32 encode of the same random weights with TF32 off, on CUDA, with both ways of choosing the
convolution kernels (`tokenizer.conv_kernels`: recorded cuDNN plans, timed into an empty folder here, and cuDNN's
heuristics).

Encoders at the released widths (Wan2.1 96, Wan2.2 160: the widths cuDNN and the fused kernels run at in a real
build; the decoders are narrow, nothing here decodes), random weights with spread gammas and biases as
bench/_common/_random_wan.py makes them (helpers/random_wan.py), one 17x240x416 clip of smooth gradients with a moving
block, in causal windows of 1 + 8 + 8 frames so the caches carry across windows.

What the docs promise (docs/tokenizers.md, BENCHMARKS.md): the fast path is closer to fp32 than diffusers' own bf16
encode (measured rel-L2 at 93x480x832: Wan2.1 4.14e-3 with plans and 4.27e-3 with heuristics against diffusers'
5.28e-3; Wan2.2 7.14e-3 / 7.28e-3 against 8.41e-3), within the bf16 tolerance deep verify applies (2e-2,
docs/verify.md), and the same bits on every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

from helpers.media import pattern_frames
from helpers.random_wan import save_random_wan_vae
from latentforge.tokenizers.base import pixels_to_input
from latentforge.tokenizers.wan.fast_encoder import choose_window

if TYPE_CHECKING:
    from diffusers import AutoencoderKLWan

FRAMES, HEIGHT, WIDTH = 17, 240, 416
WINDOW = 8


@dataclass(frozen=True)
class Architecture:
    name: str
    tokenizer: type
    config: dict  # diffusers' AutoencoderKLWan config
    latents_mean: tuple[float, ...]
    latents_std: tuple[float, ...]
    patch: int  # pixels per side folded into channels before the encoder
    max_gpu_mem_gib: float  # the budget at which the fast path picks WINDOW for this clip


def architecture_named(name: str) -> Architecture:
    # the tokenizer modules are imported here, not at collection: they import diffusers, which takes seconds
    from latentforge.tokenizers.wan import wan21, wan22, wan22_checkpoint

    if name == "wan2.1":
        return Architecture(name, wan21.Wan21Tokenizer, dict(base_dim=96, decoder_base_dim=16), wan21.LATENTS_MEAN,
                            wan21.LATENTS_STD, patch=1, max_gpu_mem_gib=2.5)
    config = wan22_checkpoint.diffusers_config(base_dim=160, decoder_base_dim=16)
    return Architecture(name, wan22.Wan22Tokenizer, config, wan22_checkpoint.LATENTS_MEAN, wan22_checkpoint.LATENTS_STD,
                        patch=2, max_gpu_mem_gib=1.2)


@dataclass(frozen=True)
class Reference:
    checkpoint: Path  # a diffusers folder of the random weights
    video: torch.Tensor  # [1, 3, T, H, W] in [-1, 1] on the GPU
    fp32: torch.Tensor  # diffusers' fp32 encode, normalised as the tokenizer normalises
    diffusers_bf16_rel_l2: float


def normalised_mu(vae: AutoencoderKLWan, video: torch.Tensor, architecture: Architecture) -> torch.Tensor:
    """diffusers' encode (mu), then (mu - mean) * (1 / std) in fp32, as the tokenizers normalise."""
    from latentforge.devices import tf32_off

    with torch.inference_mode(), tf32_off():
        mu = vae.encode(video).latent_dist.mode().float()
    mean = torch.tensor(architecture.latents_mean, device=mu.device).view(1, -1, 1, 1, 1)
    std = torch.tensor(architecture.latents_std, device=mu.device).view(1, -1, 1, 1, 1)
    return (mu - mean) * (1.0 / std)


def rel_l2(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got - expected).norm() / expected.norm())


@pytest.fixture(scope="module", params=["wan2.1", "wan2.2"])
def architecture(request) -> Architecture:
    return architecture_named(request.param)


@pytest.fixture(scope="module")
def reference(architecture, tmp_path_factory) -> Reference:
    vae, checkpoint = save_random_wan_vae(tmp_path_factory.mktemp(architecture.name) / "vae", architecture.config)
    device = torch.device("cuda")
    video = pixels_to_input(pattern_frames(FRAMES, WIDTH, HEIGHT, seed=3), device)[None]
    fp32 = normalised_mu(vae.to(device), video, architecture)
    diffusers_bf16 = normalised_mu(vae.to(torch.bfloat16), video.to(torch.bfloat16), architecture)
    return Reference(checkpoint, video, fp32, rel_l2(diffusers_bf16, fp32))


@pytest.mark.parametrize("conv_kernels", ["plans", "heuristics"])
def test_bf16_fast_path_is_closer_to_fp32_than_diffusers_bf16(architecture, reference, conv_kernels, tmp_path,
                                                               monkeypatch, request):
    if conv_kernels == "plans":
        request.getfixturevalue("cudnn_frontend")
    from latentforge.tokenizers.wan.common import HEURISTICS_MODE_B_ENV

    monkeypatch.setenv(HEURISTICS_MODE_B_ENV, "1")  # what the tokenizer sets for its process, undone afterwards
    tokenizer = architecture.tokenizer(str(reference.checkpoint), precision="bf16", device="cuda",
                                       max_gpu_mem_gib=architecture.max_gpu_mem_gib, conv_kernels=conv_kernels,
                                       conv_plans_dir=str(tmp_path / "plans"))
    encoder = tokenizer._fast
    window = choose_window(1, HEIGHT // architecture.patch, WIDTH // architecture.patch, encoder.max_gib,
                           encoder.base_dim, encoder.live_frames)
    assert window == WINDOW, f"the clip runs in windows of {window}, not 1 + {WINDOW} + {WINDOW} frames"
    fast = tokenizer.encode(reference.video)
    error = rel_l2(fast, reference.fp32)
    assert error <= reference.diffusers_bf16_rel_l2, (error, reference.diffusers_bf16_rel_l2)
    assert error < tokenizer.precisions["bf16"]
    assert torch.equal(tokenizer.encode(reference.video), fast)
    if conv_kernels == "plans":
        assert encoder.convs.book.entries(), "no convolution went through the recorded plans"


def test_frame0_encoded_alone_is_latent_frame_0_within_bf16_rounding(architecture, reference, tmp_path, request):
    """The first-frame condition (Wan2.2 TI2V) stores latent frame 0 as the encode of frame 0 alone. On the GPU's
    fast path frame 0 runs inside the clip's first window or alone: convolutions of other shapes, so other plans,
    which round differently (measured on an H200: 5.8e-3 apart for Wan2.2, whose fast path is 7.1e-3 from fp32);
    the two must agree within the bf16 tolerance deep verify applies to a re-encode."""
    request.getfixturevalue("cudnn_frontend")
    tokenizer = architecture.tokenizer(str(reference.checkpoint), precision="bf16", device="cuda",
                                       max_gpu_mem_gib=architecture.max_gpu_mem_gib, conv_kernels="plans",
                                       conv_plans_dir=str(tmp_path / "plans"))
    in_clip = tokenizer.encode(reference.video)[:, :, :1]
    alone = tokenizer.encode(reference.video[:, :, :1].contiguous())
    assert alone.shape == in_clip.shape
    assert rel_l2(alone, in_clip) < tokenizer.precisions["bf16"]
