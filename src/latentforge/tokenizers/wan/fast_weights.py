"""The fast Wan encoder's weights: the diffusers encoder as a flat list of layers, each layer's weights copied
into the compute dtype and the layouts its kernels read (channels-last convolutions, fp32 norm gains and conv
biases for the fused passes, the first conv rearranged for three stacked frames).

The caller's module is never modified: every tensor here is a private copy.
"""

from __future__ import annotations

import torch
from torch import nn


def stacked_channels(channels: int) -> int:
    """Input channels of the stacked first conv: 3 frames x channels, zero-padded to a multiple of 8 (tensor
    cores): 16 for Wan2.1's 3 colours, 40 for Wan2.2's 12 patchified channels."""
    return -(-3 * channels // 8) * 8


def _linear(conv: torch.nn.Module, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """A 1x1 convolution's weight as a matrix, and its bias."""
    return {"weight": conv.weight.detach().to(dtype)[:, :, 0, 0], "bias": conv.bias.detach().to(dtype)}


def flatten_encoder(encoder: nn.Module) -> list[tuple[str, nn.Module]]:
    """The encoder as a flat list of (kind, module) in execution order (Wan2.2's down blocks stay whole)."""
    layers: list[tuple[str, nn.Module]] = [("conv_in", encoder.conv_in)]
    for block in encoder.down_blocks:
        name = type(block).__name__
        if name == "WanResidualBlock":
            layers.append(("resblock", block))
        elif name == "WanResidualDownBlock":
            layers.append(("resdown", block))
        elif name == "WanResample" and block.mode in ("downsample2d", "downsample3d"):
            layers.append(("down3d" if block.mode == "downsample3d" else "down2d", block))
        elif name == "WanAttentionBlock":
            layers.append(("attention", block))
        else:
            raise ValueError(f"unsupported encoder block {name} (the fast path covers the Wan2.1 and 2.2 VAEs)")
    mid = encoder.mid_block
    layers += [("resblock", mid.resnets[0]), ("attention", mid.attentions[0]), ("resblock", mid.resnets[1])]
    layers.append(("head", encoder))
    return layers


def _stacked_conv_in(module: nn.Module, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """[96, 3, 3, 3, 3] -> [96, 16, 3, 3]: input channel k*3 + c is colour c of frame t - 2 + k (Wan2.2:
    [160, 12, 3, 3, 3] -> [160, 40, 3, 3], channel k*12 + c)."""
    weight = module.weight.detach()
    out_channels, colours, taps = weight.shape[:3]
    stacked = weight.new_zeros((out_channels, stacked_channels(colours), *weight.shape[3:]))
    for k in range(taps):
        stacked[:, k * colours : (k + 1) * colours] = weight[:, :, k]
    stacked = stacked.to(dtype).contiguous(memory_format=torch.channels_last)
    return {"weight": stacked, "bias": module.bias.detach().to(dtype)}


def _conv(module: nn.Module, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Weights in the compute dtype and channels-last layout; the bias also in fp32 for the fused passes."""
    weight = module.weight.detach().to(dtype)
    if weight.dim() == 5:
        weight = weight.contiguous(memory_format=torch.channels_last_3d)
    elif weight.dim() == 4:
        weight = weight.contiguous(memory_format=torch.channels_last)
    bias = module.bias.detach() if module.bias is not None else None
    return {
        "weight": weight,
        "bias": bias.to(dtype) if bias is not None else None,
        "bias_fp32": bias.float() if bias is not None else None,
    }


def _norm(module: nn.Module, flat: bool = False) -> torch.Tensor:
    weight = (module.gamma.detach().float() * module.scale).reshape(-1)
    return weight if flat else weight.reshape(1, -1, 1, 1, 1)


def prepare_params(layers: list[tuple[str, nn.Module]], dtype: torch.dtype) -> list[dict]:
    return [_prepare_layer(kind, module, dtype) for kind, module in layers]


def _prepare_layer(kind: str, module: nn.Module, dtype: torch.dtype) -> dict:
    if kind == "conv_in":
        return _stacked_conv_in(module, dtype)
    if kind == "resblock":
        entry = {
            "norm1": _norm(module.norm1),
            "conv1": _conv(module.conv1, dtype),
            "norm2": _norm(module.norm2),
            "conv2": _conv(module.conv2, dtype),
        }
        if isinstance(module.conv_shortcut, nn.Conv3d):
            entry["shortcut"] = _conv(module.conv_shortcut, dtype)
        return entry
    if kind in ("down2d", "down3d"):
        entry = {"spatial": _conv(module.resample[1], dtype)}
        if kind == "down3d":
            entry["time"] = _conv(module.time_conv, dtype)
        return entry
    if kind == "resdown":
        down = module.downsampler
        avg = module.avg_shortcut
        return {
            "resnets": [_prepare_layer("resblock", resnet, dtype) for resnet in module.resnets],
            "down": None if down is None else _prepare_layer(down.mode.replace("downsample", "down"), down, dtype),
            "avg": (avg.factor_t, avg.factor_s, avg.out_channels),
        }
    if kind == "attention":
        return {
            "norm": _norm(module.norm, flat=True),
            "qkv": _linear(module.to_qkv, dtype),
            "proj": _linear(module.proj, dtype),
        }
    if kind == "head":
        return {"norm": _norm(module.norm_out), "conv": _conv(module.conv_out, dtype)}
    if kind == "quant":
        return {"conv": _conv(module, dtype)}
    raise ValueError(f"unknown layer kind {kind}")
