"""A fast forward of the Wan VAE encoders over diffusers' weights: same maths, fewer and larger kernels.

It runs the Wan2.1 encoder and the Wan2.2 one (residual down blocks with a space-to-channel average shortcut,
AvgDown3D, over 2x2-patchified 12-channel input, which the caller patchifies).

What changes against diffusers' `_encode` (and why the result is the same function):
- Causal windows of `1 + W` then `W` frames (W a multiple of 4) instead of 1, 4, 4, ... frames. Every causal
  3x3x3 conv keeps the last two frames of its zero-padded input and every temporal downsample its last frame,
  so each output frame sees exactly the inputs it sees in the reference (formats.md §1: the window changes
  memory and speed, not the result).
- Activations and weights in channels-last 3D, so each RMS norm is a reduction over contiguous channels.
- Residual add + RMS norm + SiLU in one fused pass (wan21_kernels), computed in fp32 and rounded once, written
  straight into the buffer the next causal conv reads (no separate pad/concatenate copy).
- The first conv (3 input channels, which cuDNN runs ~20x below its peak; Wan2.2: 12) becomes a 2-D conv over
  the three frames it reads stacked as 9 (zero-padded to 16; Wan2.2: 36 padded to 40) channels, with the weights
  rearranged to match.
- Spatial downsamples run as 2-D convolutions over frames folded into the batch; the pass that adds the
  previous block's bias and residual writes straight into their zero-padded input (no separate pad copy).
- The mid-block attention runs over every frame of the window at once, as a Triton flash-attention kernel for
  its one wide head (wan_attention.py; PyTorch's flash kernels stop at 256 channels), SDPA on the CPU.
- Wan2.2's down-block shortcut (the block input folded to channels and averaged in groups) is added in the
  fused pass that follows, like any residual.
- Every convolution runs through `convs`: PyTorch's call (cuDNN's heuristics choose the kernel, or its timing
  race with `cudnn_benchmark`), or kernel plans replayed by name from a recorded PlanBook (kernels/planned_convs.py).
The exact `fp32` mode does not use this module: it runs diffusers' own path (bit-identical by construction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..kernels.launch_pacing import LaunchPacer
from ..kernels.planned_convs import TorchConvs
from .attention import single_head_attention
from .fast_weights import flatten_encoder, prepare_params, stacked_channels
from .fused_norm import add_rms_silu

Convs = Callable[..., torch.Tensor]  # (x, weight, bias, stride, padding) -> conv output

# Peak memory of one encode ~ (window + _FIXED_FRAMES) x live frames per frame x one full-resolution stage-0
# frame. Measured on an H200: Wan2.1 (96 channels) 12.4 GiB at window 16 and 19.2 GiB at window 32 at 93x480x832;
# Wan2.2 (160 channels, residual down blocks) 28.1 GiB at window 44 at 121x704x1280, 7.33 frames per frame.
_LIVE_FRAMES_PER_FRAME = 6
_LIVE_FRAMES_PER_FRAME_RESIDUAL_DOWN = 7.5
_FIXED_FRAMES = 13
_MAX_WINDOW = 64


def choose_window(batch: int, height: int, width: int, max_gib: float, base_dim: int = 96,
                  live_frames: float = _LIVE_FRAMES_PER_FRAME) -> int:
    """The largest causal window (a multiple of 4, at most 64) whose stage-0 activations fit in max_gib."""
    bytes_per_frame = batch * base_dim * height * width * 2 * live_frames
    frames = int(max_gib * 2**30 // bytes_per_frame) - _FIXED_FRAMES
    return max(4, min(_MAX_WINDOW, frames // 4 * 4))


@dataclass
class _Residual:
    """A conv output whose bias (and residual shortcut) are still to be added, fused into the next pass."""

    h: torch.Tensor
    shortcut: torch.Tensor | None
    bias: torch.Tensor | None


def _rms(tokens: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMS norm over the last (channel) dim in fp32, rounded once."""
    return (F.normalize(tokens.float(), dim=-1) * weight).to(tokens.dtype)


def _channels_last(shape, like: torch.Tensor) -> torch.Tensor:
    return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=torch.channels_last_3d)


class FastWanEncoder(nn.Module):
    """Encodes [B,3,T,H,W] in [-1,1] to the unnormalised posterior mean mu [B,16,T',H',W'] (float32)."""

    def __init__(
        self,
        encoder: nn.Module,
        quant_conv: nn.Module,
        dtype: torch.dtype = torch.bfloat16,
        window: int | None = 32,
        max_gib: float = 24.0,
        cudnn_benchmark: bool = False,
        convs: Convs | None = None,
    ):
        super().__init__()
        if window is not None and (window < 4 or window % 4 != 0):
            raise ValueError(f"window={window} must be a positive multiple of 4")
        self.dtype = dtype
        self.window = window  # None: chosen per call from the clip size and max_gib
        self.max_gib = max_gib
        self.cudnn_benchmark = cudnn_benchmark
        self.convs = convs or TorchConvs()  # who runs each convolution (kernels/planned_convs.py)
        self.base_dim = encoder.conv_in.out_channels  # stage-0 width, for the memory estimate of the window
        self.layers = flatten_encoder(encoder)
        residual_down = any(kind == "resdown" for kind, _ in self.layers)
        self.live_frames = _LIVE_FRAMES_PER_FRAME_RESIDUAL_DOWN if residual_down else _LIVE_FRAMES_PER_FRAME
        # A private copy in the compute dtype and layout; the caller's module stays untouched.
        self._params = prepare_params(self.layers + [("quant", quant_conv)], dtype)
        self.pacer = LaunchPacer()  # across calls: a unit's batches and modalities are one stream of windows

    # ------------------------------------------------------------------------------------------ forward

    @torch.inference_mode()
    def forward(self, video: torch.Tensor) -> torch.Tensor:
        frames = video.shape[2]
        if (frames - 1) % 4 != 0:
            raise ValueError(f"{frames} frames: the causal 4x encoder needs (T - 1) % 4 == 0")
        x = video.to(self.dtype)
        window = self.window or choose_window(x.shape[0], x.shape[3], x.shape[4], self.max_gib, self.base_dim,
                                              self.live_frames)
        caches: dict = {}
        outputs = []
        start, size = 0, 1 + window
        deterministic = not self.cudnn_benchmark
        with torch.backends.cudnn.flags(enabled=True, benchmark=self.cudnn_benchmark, deterministic=deterministic):
            while start < frames:
                chunk = x[:, :, start : start + size]
                outputs.append(self._window(chunk, caches, first=start == 0))
                self.pacer.queued(x.device)
                start += chunk.shape[2]
                size = window
        return torch.cat(outputs, dim=2)

    def _window(self, x: torch.Tensor, caches: dict, first: bool) -> torch.Tensor:
        p = self._params
        for index, (kind, _) in enumerate(self.layers):
            if kind == "conv_in":
                x = self._conv_in(x, p[index], caches, index)
            elif kind == "resblock":
                x = self._resblock(x, p[index], caches, index)
            elif kind == "down2d":
                x = self._down_spatial(x, p[index])
            elif kind == "down3d":
                x = self._down_spatial(x, p[index])
                x = self._down_time(x, p[index], caches, index, first)
            elif kind == "resdown":
                x = self._residual_down(x, p[index], caches, index, first)
            elif kind == "attention":
                x = self._attention(self._value(x), p[index])
            elif kind == "head":
                x = self._value(self._causal_conv(x, p[index]["norm"], p[index]["conv"], caches, (index, 0))[:2])
        quant = p[len(self.layers)]["conv"]
        moments = self.convs(x, quant["weight"], quant["bias"], 1, 0)
        mu = moments[:, : moments.shape[1] // 2]
        return mu.float()

    @staticmethod
    def _value(x) -> torch.Tensor:
        if isinstance(x, tuple):  # (conv output, pending bias)
            x = _Residual(x[0], None, x[1])
        if isinstance(x, _Residual):
            add_rms_silu(x.h, x.shortcut, None, None, sum_out=x.h, bias=x.bias)
            return x.h
        return x

    def _conv_in(self, x: torch.Tensor, p: dict, caches: dict, index: int) -> torch.Tensor:
        """The causal 3x3x3 conv over the input channels as a 3x3 conv of the stacked frames (t-2, t-1, t).

        The window's frames go once into pixel rows behind the two cached ones ([B, T+2, H, W, colours]); a view
        whose tap axis steps by one frame then holds each pixel's three frames, copied in one pass into the first
        3 x colours channels of the stacked input."""
        batch, colours, frames, height, width = x.shape
        rows = x.new_empty((batch, frames + 2, height, width, colours))
        previous = caches.get((index, 0))
        if previous is None:
            rows[:, :2].zero_()
        else:
            rows[:, :2].copy_(previous)
        rows[:, 2:].copy_(x.permute(0, 2, 3, 4, 1))
        caches[(index, 0)] = rows[:, -2:].clone()
        channels = stacked_channels(colours)
        stacked = x.new_empty((batch, frames, height, width, channels))
        frame_step = rows.stride(1)
        taps = rows.as_strided((batch, frames, height, width, 3, colours), (*rows.stride()[:4], frame_step, 1))
        stacked[..., : 3 * colours].view(batch, frames, height, width, 3, colours).copy_(taps)
        stacked[..., 3 * colours :].zero_()
        planes = stacked.view(batch * frames, height, width, channels).permute(0, 3, 1, 2)  # channels-last 2-D
        out = self.convs(planes, p["weight"], p["bias"], 1, 1)
        return out.reshape(batch, frames, -1, height, width).permute(0, 2, 1, 3, 4)

    def _causal_conv(self, x, norm, conv, caches, key, keep_input: bool = True):
        """3x3x3 causal conv of silu(rms(x)) -> (conv output, its pending bias, x with anything pending added).

        The conv runs without its bias; the caller passes the bias on to the next fused pass. With
        keep_input False the pending input is not materialised (nothing else reads it).
        """
        pending = x if isinstance(x, _Residual) else None
        source = pending.h if pending else x
        batch, channels, frames, height, width = source.shape
        padded = _channels_last((batch, channels, frames + 2, height, width), source)
        previous = caches.get(key)
        if previous is None:
            padded[:, :, :2].zero_()
        else:
            padded[:, :, :2].copy_(previous)
        total = source
        if pending:
            total = _channels_last(source.shape, source) if keep_input else None
            add_rms_silu(pending.h, pending.shortcut, norm, padded[:, :, 2:], sum_out=total, bias=pending.bias)
        else:
            add_rms_silu(source, None, norm, padded[:, :, 2:])
        caches[key] = padded[:, :, -2:].clone()
        out = self.convs(padded, conv["weight"], None, 1, (0, 1, 1))
        return out, conv["bias_fp32"], total

    def _resblock(self, x, p, caches, index) -> _Residual:
        return self._resblock_and_input(x, p, caches, index)[0]

    def _resblock_and_input(self, x, p, caches, index) -> tuple[_Residual, torch.Tensor]:
        """The block's pending output, and its input with anything pending added (its shortcut reads it)."""
        h, bias, x = self._causal_conv(x, p["norm1"], p["conv1"], caches, (index, 1))
        shortcut = self.convs(x, p["shortcut"]["weight"], p["shortcut"]["bias"], 1, 0) if "shortcut" in p else x
        h, bias, _ = self._causal_conv(_Residual(h, None, bias), p["norm2"], p["conv2"], caches, (index, 2),
                                       keep_input=False)
        return _Residual(h, shortcut, bias), x

    def _residual_down(self, x, p, caches, index, first) -> _Residual:
        """Wan2.2's down block: residual blocks, then (but the last) a downsample, plus the block input averaged
        down to the output's shape; the sum is left pending for the next fused pass."""
        x, block_input = self._resblock_and_input(x, p["resnets"][0], caches, (index, 0))
        for j, resnet in enumerate(p["resnets"][1:], start=1):
            x = self._resblock(x, resnet, caches, (index, j))
        down = p["down"]
        if down is not None:
            x = self._down_spatial(x, down)
            if "time" in down:
                x = self._down_time(x, down, caches, (index, "down"), first)
        shortcut = _avg_down(block_input, *p["avg"])
        if isinstance(x, _Residual):  # no downsample: the last block's own shortcut and this one, added first
            return _Residual(x.h, x.shortcut + shortcut, x.bias)
        return _Residual(x, shortcut, None)

    def _down_spatial(self, x, p) -> torch.Tensor:
        # ZeroPad2d((0, 1, 0, 1)) then a stride-2 3x3 Conv2d on every frame. Frames are folded into the batch
        # of a 2-D convolution (a view in channels-last 3D memory), where cuDNN has faster kernels.
        padded = self._padded_frames(x)
        batch, channels, frames, height, width = padded.shape
        planes = padded.permute(0, 2, 1, 3, 4).reshape(batch * frames, channels, height, width)
        out = self.convs(planes, p["spatial"]["weight"], p["spatial"]["bias"], 2, 0)
        _, out_channels, out_height, out_width = out.shape
        return out.reshape(batch, frames, out_channels, out_height, out_width).permute(0, 2, 1, 3, 4)

    @staticmethod
    def _padded_frames(x) -> torch.Tensor:
        """x (anything pending added) with a zero row below and a zero column right of every frame: the pass that
        adds a pending bias and residual writes the sum straight into the padded buffer's interior."""
        pending = x if isinstance(x, _Residual) else None
        source = pending.h if pending else x
        batch, channels, frames, height, width = source.shape
        padded = _channels_last((batch, channels, frames, height + 1, width + 1), source)
        padded[:, :, :, height].zero_()
        padded[:, :, :, :height, width].zero_()
        inside = padded[:, :, :, :height, :width]
        if pending:
            add_rms_silu(pending.h, pending.shortcut, None, None, sum_out=inside, bias=pending.bias)
        else:
            inside.copy_(source)
        return padded

    def _down_time(self, x, p, caches, index, first) -> torch.Tensor:
        # Reference: frame 0 passes through; later frames go through a stride-2 (3,1,1) conv whose input starts
        # with the last frame seen before. Over a whole clip: [x0] + conv(x0, x1, ..., xN).
        key = (index, 3)
        if first:
            head = x[:, :, :1]
            body = x
        else:
            head = None
            body = torch.cat([caches[key], x], dim=2)
        caches[key] = x[:, :, -1:].clone()
        if body.shape[2] < 3:  # a lone first frame (one image, or deep verify's frame-0 check): it only passes
            return head
        out = self.convs(body, p["time"]["weight"], p["time"]["bias"], (2, 1, 1), 0)
        return out if head is None else torch.cat([head, out], dim=2)

    def _attention(self, x, p) -> torch.Tensor:
        batch, channels, frames, height, width = x.shape
        tokens = x.permute(0, 2, 3, 4, 1).reshape(batch * frames, height * width, channels)
        normed = _rms(tokens, p["norm"])
        q, k, v = F.linear(normed, p["qkv"]["weight"], p["qkv"]["bias"]).chunk(3, dim=-1)
        attended = single_head_attention(q, k, v)
        out = F.linear(attended, p["proj"]["weight"], p["proj"]["bias"]) + tokens
        return out.reshape(batch, frames, height, width, channels).permute(0, 4, 1, 2, 3)


def _avg_down(x: torch.Tensor, factor_t: int, factor_s: int, out_channels: int) -> torch.Tensor:
    """diffusers' AvgDown3D: frames zero-padded at the front to a multiple of factor_t, each (factor_t, factor_s,
    factor_s) cell folded into channels (channel-major), consecutive groups of them averaged to out_channels.

    A group is the cell's last dims (the whole cell, its rows or its columns), so the mean runs over those dims of
    a view of the channels-last input (no folded copy) and only the smaller result is rearranged.
    """
    x = F.pad(x, (0, 0, 0, 0, (-x.shape[2]) % factor_t, 0))
    batch, channels, frames, height, width = x.shape
    t, h, w = frames // factor_t, height // factor_s, width // factor_s
    cell = (factor_t, factor_s, factor_s)
    group = channels * factor_t * factor_s * factor_s // out_channels
    averaged = next((k for k in range(4) if math.prod(cell[3 - k :]) == group), None)
    if averaged is None:
        raise ValueError(f"AvgDown3D groups of {group} are not the last dims of its {cell} cells")
    cells = x.permute(0, 2, 3, 4, 1).reshape(batch, t, factor_t, h, factor_s, w, factor_s, channels)
    cells = cells.permute(0, 1, 3, 5, 7, 2, 4, 6)  # [B, t, h, w, C, factor_t, factor_s, factor_s], a view
    means = cells.mean(dim=tuple(range(8 - averaged, 8))) if averaged else cells
    return means.reshape(batch, t, h, w, out_channels).permute(0, 4, 1, 2, 3)  # [B, out, t, h, w], channels-last
