"""A fast forward of the Wan2.1 VAE encoder over diffusers' weights: same maths, fewer and larger kernels.

What changes against diffusers' `_encode` (and why the result is the same function):
- Causal windows of `1 + W` then `W` frames (W a multiple of 4) instead of 1, 4, 4, ... frames. Every causal
  3x3x3 conv keeps the last two frames of its zero-padded input and every temporal downsample its last frame,
  so each output frame sees exactly the inputs it sees in the reference (formats.md §1: the window changes
  memory and speed, not the result).
- Activations and weights in channels-last 3D, so each RMS norm is a reduction over contiguous channels.
- RMS norm + SiLU computed in fp32 and rounded once, written straight into the buffer the next causal conv
  reads (no separate pad/concatenate copy); with `compile=True` torch.compile fuses it into one kernel.
- The mid-block attention runs as one SDPA over every frame of the window.
The exact `fp32` mode does not use this module: it runs diffusers' own path (bit-identical by construction).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn


# Live activation frames per input frame in the worst (full-resolution) stage: input, two padded buffers,
# two conv outputs and the shortcut, with headroom. Calibrated on an H200 (BENCHMARKS.md).
_LIVE_FRAMES_PER_FRAME = 6
_MAX_WINDOW = 64


def choose_window(batch: int, height: int, width: int, max_gib: float, base_dim: int = 96) -> int:
    """The largest causal window (a multiple of 4, at most 64) whose stage-0 activations fit in max_gib."""
    bytes_per_frame = batch * base_dim * height * width * 2 * _LIVE_FRAMES_PER_FRAME
    frames = int(max_gib * 2**30 // bytes_per_frame) - 3  # the first window holds 1 + W frames plus 2 cached
    return max(4, min(_MAX_WINDOW, frames // 4 * 4))


def _rms_silu(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> None:
    """out <- silu(normalize(x over channels) * weight), computed in fp32, rounded once to out.dtype."""
    y = F.normalize(x.float(), dim=1) * weight
    out.copy_(F.silu(y))


def _rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return (F.normalize(x.float(), dim=-1) * weight).to(x.dtype)


class FastWanEncoder(nn.Module):
    """Encodes [B,3,T,H,W] in [-1,1] to the unnormalised posterior mean mu [B,16,T',H',W'] (float32)."""

    def __init__(
        self,
        encoder: nn.Module,
        quant_conv: nn.Module,
        dtype: torch.dtype = torch.bfloat16,
        window: int | None = 32,
        compile: bool = False,
        max_gib: float = 24.0,
    ):
        super().__init__()
        if window is not None and (window < 4 or window % 4 != 0):
            raise ValueError(f"window={window} must be a positive multiple of 4")
        self.dtype = dtype
        self.window = window  # None: chosen per call from the clip size and max_gib
        self.max_gib = max_gib
        self.layers = _flatten_encoder(encoder)
        self.quant_conv = quant_conv
        # A private copy in the compute dtype and layout; the caller's module stays untouched.
        self._params = _prepare_params(self.layers + [("quant", quant_conv)], dtype)
        self._rms_silu: Callable = torch.compile(_rms_silu) if compile else _rms_silu
        if compile:
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)

    # ------------------------------------------------------------------------------------------ forward

    @torch.inference_mode()
    def forward(self, video: torch.Tensor) -> torch.Tensor:
        frames = video.shape[2]
        if (frames - 1) % 4 != 0:
            raise ValueError(f"{frames} frames: the causal 4x encoder needs (T - 1) % 4 == 0")
        x = video.to(self.dtype).contiguous(memory_format=torch.channels_last_3d)
        window = self.window or choose_window(x.shape[0], x.shape[3], x.shape[4], self.max_gib)
        caches: dict[int, torch.Tensor] = {}
        outputs = []
        start, size = 0, 1 + window
        while start < frames:
            chunk = x[:, :, start : start + size]
            outputs.append(self._window(chunk, caches, first=start == 0))
            start += chunk.shape[2]
            size = window
        return torch.cat(outputs, dim=2)

    def _window(self, x: torch.Tensor, caches: dict[int, torch.Tensor], first: bool) -> torch.Tensor:
        p = self._params
        for index, (kind, _) in enumerate(self.layers):
            if kind == "conv_in":
                x = self._causal_conv(x, p[index]["conv"], caches, (index, 0), activate=None)
            elif kind == "resblock":
                x = self._resblock(x, p[index], caches, index)
            elif kind == "down2d":
                x = self._down_spatial(x, p[index])
            elif kind == "down3d":
                x = self._down_spatial(x, p[index])
                x = self._down_time(x, p[index], caches, index, first)
            elif kind == "attention":
                x = self._attention(x, p[index])
            elif kind == "head":
                x = self._causal_conv(x, p[index]["conv"], caches, (index, 0), activate=p[index]["norm"])
        quant = p[len(self.layers)]["conv"]
        mu = F.conv3d(x, quant["weight"], quant["bias"])[:, :16]
        return mu.float()

    def _causal_conv(self, x, conv, caches, key, activate: torch.Tensor | None) -> torch.Tensor:
        """3x3x3 causal conv of (optionally) silu(rms(x)); the two cached frames are written in front."""
        batch, channels, frames, height, width = x.shape
        padded = torch.empty(
            (batch, channels, frames + 2, height, width), dtype=self.dtype, device=x.device
        ).contiguous(memory_format=torch.channels_last_3d)
        previous = caches.get(key)
        if previous is None:
            padded[:, :, :2].zero_()
        else:
            padded[:, :, :2].copy_(previous)
        if activate is None:
            padded[:, :, 2:].copy_(x)
        else:
            self._rms_silu(x, activate, padded[:, :, 2:])
        caches[key] = padded[:, :, -2:].clone()
        return F.conv3d(padded, conv["weight"], conv["bias"], padding=(0, 1, 1))

    def _resblock(self, x, p, caches, index) -> torch.Tensor:
        shortcut = F.conv3d(x, p["shortcut"]["weight"], p["shortcut"]["bias"]) if "shortcut" in p else x
        h = self._causal_conv(x, p["conv1"], caches, (index, 1), activate=p["norm1"])
        h = self._causal_conv(h, p["conv2"], caches, (index, 2), activate=p["norm2"])
        return h.add_(shortcut)

    def _down_spatial(self, x, p) -> torch.Tensor:
        # ZeroPad2d((0, 1, 0, 1)) then a stride-2 3x3 Conv2d on every frame, as one (1,3,3) conv3d.
        x = F.pad(x, (0, 1, 0, 1))
        return F.conv3d(x, p["spatial"]["weight"], p["spatial"]["bias"], stride=(1, 2, 2))

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
        out = F.conv3d(body, p["time"]["weight"], p["time"]["bias"], stride=(2, 1, 1))
        return out if head is None else torch.cat([head, out], dim=2)

    def _attention(self, x, p) -> torch.Tensor:
        batch, channels, frames, height, width = x.shape
        tokens = x.permute(0, 2, 3, 4, 1).reshape(batch * frames, height * width, channels)
        normed = _rms(tokens, p["norm"])
        q, k, v = F.linear(normed, p["qkv"]["weight"], p["qkv"]["bias"]).chunk(3, dim=-1)
        attended = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]
        out = F.linear(attended, p["proj"]["weight"], p["proj"]["bias"]) + tokens
        return out.reshape(batch, frames, height, width, channels).permute(0, 4, 1, 2, 3)


# ------------------------------------------------------------------------------------ weight preparation


def _flatten_encoder(encoder: nn.Module) -> list[tuple[str, nn.Module]]:
    """The encoder as a flat list of (kind, module) in execution order (Wan2.1: no residual down blocks)."""
    layers: list[tuple[str, nn.Module]] = [("conv_in", encoder.conv_in)]
    for block in encoder.down_blocks:
        name = type(block).__name__
        if name == "WanResidualBlock":
            layers.append(("resblock", block))
        elif name == "WanResample" and block.mode in ("downsample2d", "downsample3d"):
            layers.append(("down3d" if block.mode == "downsample3d" else "down2d", block))
        elif name == "WanAttentionBlock":
            layers.append(("attention", block))
        else:
            raise ValueError(f"unsupported encoder block {name} (the fast path covers the Wan2.1 VAE)")
    mid = encoder.mid_block
    layers += [("resblock", mid.resnets[0]), ("attention", mid.attentions[0]), ("resblock", mid.resnets[1])]
    layers.append(("head", encoder))
    return layers


def _conv(module: nn.Module, dtype: torch.dtype, as_3d: bool = False) -> dict[str, torch.Tensor]:
    weight = module.weight.detach().to(dtype)
    if as_3d and weight.dim() == 4:
        weight = weight.unsqueeze(2)
    if weight.dim() == 5:
        weight = weight.contiguous(memory_format=torch.channels_last_3d)
    bias = module.bias.detach().to(dtype) if module.bias is not None else None
    return {"weight": weight, "bias": bias}


def _norm(module: nn.Module, flat: bool = False) -> torch.Tensor:
    weight = (module.gamma.detach().float() * module.scale).reshape(-1)
    return weight if flat else weight.reshape(1, -1, 1, 1, 1)


def _prepare_params(layers: list[tuple[str, nn.Module]], dtype: torch.dtype) -> list[dict]:
    params: list[dict] = []
    for kind, module in layers:
        if kind == "conv_in":
            params.append({"conv": _conv(module, dtype)})
        elif kind == "resblock":
            entry = {
                "norm1": _norm(module.norm1),
                "conv1": _conv(module.conv1, dtype),
                "norm2": _norm(module.norm2),
                "conv2": _conv(module.conv2, dtype),
            }
            if isinstance(module.conv_shortcut, nn.Conv3d):
                entry["shortcut"] = _conv(module.conv_shortcut, dtype)
            params.append(entry)
        elif kind in ("down2d", "down3d"):
            entry = {"spatial": _conv(module.resample[1], dtype, as_3d=True)}
            if kind == "down3d":
                entry["time"] = _conv(module.time_conv, dtype)
            params.append(entry)
        elif kind == "attention":
            qkv, proj = module.to_qkv, module.proj
            params.append(
                {
                    "norm": _norm(module.norm, flat=True),
                    "qkv": {"weight": qkv.weight.detach().to(dtype)[:, :, 0, 0], "bias": qkv.bias.detach().to(dtype)},
                    "proj": {"weight": proj.weight.detach().to(dtype)[:, :, 0, 0], "bias": proj.bias.detach().to(dtype)},
                }
            )
        elif kind == "head":
            params.append({"norm": _norm(module.norm_out), "conv": _conv(module.conv_out, dtype)})
        elif kind == "quant":
            params.append({"conv": _conv(module, dtype)})
    return params
