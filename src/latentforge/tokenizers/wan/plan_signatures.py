"""Which convolutions the bf16 fast path runs for given call shapes, found without a GPU or weights: the fast encoder
is traced on PyTorch's meta device (shapes and strides only), each convolution answered by an empty output in the
layout every plan writes (channels-last), and its signature recorded (conv_kernel.signature). The same shapes give
the same signatures on a GPU, so a CPU can say which of a build's convolutions a plan book lacks before any GPU is
asked."""

from __future__ import annotations

from typing import Callable, Iterable

import torch
from diffusers import AutoencoderKLWan

from ..kernels.conv_kernel import conv_output, signature
from .fast_encoder import FastWanEncoder

Shape = tuple[int, int, int, int]  # (batch, frames, height, width) of a tokenizer call


class _Recorder:
    """Stands in for the fast encoder's convolutions: notes each signature, returns an empty output."""

    def __init__(self):
        self.seen: set[str] = set()

    def __call__(self, x, weight, bias, stride, padding) -> torch.Tensor:
        self.seen.add(signature(x, weight, bias, stride, padding))
        return conv_output(x, weight, stride, padding)


def traced_signatures(architecture: Callable[[], AutoencoderKLWan], fast_input: Callable[[torch.Tensor], torch.Tensor],
                      shapes: Iterable[Shape], max_gib: float) -> set[str]:
    """Every convolution signature the fast path over `architecture()` (a VAE of the released widths, made here on
    the meta device) runs for `shapes` of [B, 3, T, H, W] video, which `fast_input` turns into the encoder's input
    (Wan2.2 patchifies it)."""
    with torch.device("meta"):
        vae = architecture()
        recorder = _Recorder()
        fast = FastWanEncoder(vae.encoder, vae.quant_conv, torch.bfloat16, window=None, max_gib=max_gib,
                              convs=recorder)
        for batch, frames, height, width in shapes:
            fast(fast_input(torch.zeros((batch, 3, frames, height, width), dtype=torch.bfloat16)))
    return recorder.seen
