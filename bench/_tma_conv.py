"""The TMA-load causal conv of bench/conv_tma.py: its config and its Triton kernel, with an optional epilogue that
runs wan21_kernels.add_rms_silu's arithmetic on the tile (see that bench for what is measured).

The input [B, C, T+2, H, W] (channels-last 3D, two causal frames in front) is read through a 5-D TMA descriptor
over [B, T+2, H, W, C]; a tap's A tile is a box of BH x BW positions of one frame x K channels, the rows and
columns outside the frame read as zeros by the hardware. One program holds BH*BW positions x sum(n_split) output
channels (two power-of-two dots sharing the A tile), accumulates in fp32 in a fixed order and rounds once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from latentforge.tokenizers.triton_conv import interpreting, triton  # noqa: E402

if triton is not None:  # without Triton only the config is usable
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    from latentforge.tokenizers.triton_conv import mma


@dataclass(frozen=True)
class TmaConfig:
    """A program's tile (bh x bw positions of one frame x sum(n_split) output channels), K steps of sum(k_split)
    channels of one tap, `group` frames of a spatial tile launched together, warps and pipeline stages."""

    bh: int
    bw: int
    k_split: tuple[int, ...]
    n_split: tuple[int, ...]
    group: int = 4
    num_warps: int = 4
    num_stages: int = 4

    @property
    def label(self) -> str:
        return (f"tma{self.bh}x{self.bw}_k{'+'.join(map(str, self.k_split))}_n{'+'.join(map(str, self.n_split))}"
                f"_g{self.group}_w{self.num_warps}_s{self.num_stages}")

    @classmethod
    def parse(cls, label: str) -> TmaConfig:
        tile, *parts = label.split("_")
        fields = {part[0]: part[1:] for part in parts}
        bh, bw = (int(v) for v in tile.removeprefix("tma").split("x"))
        return cls(bh, bw, tuple(int(v) for v in fields["k"].split("+")),
                   tuple(int(v) for v in fields["n"].split("+")), int(fields["g"]), int(fields["w"]), int(fields["s"]))


def conv3d_tma(padded: torch.Tensor, taps: torch.Tensor, cfg: TmaConfig, bias=None, residual=None, norm_weight=None,
               norm_out=None, write_out: bool = True) -> torch.Tensor:
    """The causal conv of `padded` [B, C, T+2, H, W] (channels-last 3D) with `taps` [27, C, Cout]; returns the
    [B, Cout, T, H, W] output (unwritten when `write_out` is False). With `bias` / `residual` the output is
    round(conv + bias + residual); with `norm_out` (the next conv's [B, Cout, T+2, H, W] buffer, frames 2.. written)
    silu(normalize(output) * norm_weight) too, as add_rms_silu computes them."""
    batch, channels, padded_frames, height, width = padded.shape
    out_channels = taps.shape[2]
    frames = padded_frames - 2
    out = torch.empty((batch, out_channels, frames, height, width), device=padded.device, dtype=padded.dtype,
                      memory_format=torch.channels_last_3d)
    x5 = padded.permute(0, 2, 3, 4, 1)  # [B, T+2, H, W, C], channel stride 1
    k_a, k_b = (*cfg.k_split, 0)[:2]
    n_a, n_b = (*cfg.n_split, 0)[:2]
    x_a = TensorDescriptor(x5, list(x5.shape), list(x5.stride()), [1, 1, cfg.bh, cfg.bw, k_a])
    x_b = TensorDescriptor(x5, list(x5.shape), list(x5.stride()), [1, 1, cfg.bh, cfg.bw, k_b or k_a])
    w2 = taps.reshape(27 * channels, out_channels)
    w_aa = TensorDescriptor.from_tensor(w2, [k_a, n_a])
    w_ab = TensorDescriptor.from_tensor(w2, [k_a, n_b or n_a])
    w_ba = TensorDescriptor.from_tensor(w2, [k_b or k_a, n_a])
    w_bb = TensorDescriptor.from_tensor(w2, [k_b or k_a, n_b or n_a])
    tiles_h, tiles_w = triton.cdiv(height, cfg.bh), triton.cdiv(width, cfg.bw)
    n_programs = out_channels // sum(cfg.n_split)
    grid = (batch * frames * tiles_h * tiles_w * n_programs,)
    _conv_tma_kernel[grid](
        x_a, x_b, w_aa, w_ab, w_ba, w_bb, out, frames, height, width, tiles_w, tiles_h * tiles_w, batch * frames,
        *(out if t is None else t for t in (bias, residual, norm_weight, norm_out)),
        *([0] * 4 if norm_out is None else [norm_out.stride(i) for i in (0, 2, 3, 4)]),
        HAS_BIAS=bias is not None, HAS_RESIDUAL=residual is not None, WRITE_NORM=norm_out is not None,
        WRITE_OUT=write_out, C=channels, COUT=out_channels, BH=cfg.bh, BW=cfg.bw, K_A=k_a, K_B=k_b, N_A=n_a,
        N_B=n_b, N_PROGRAMS=n_programs, GROUP=cfg.group, DOT_FP32=interpreting(),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return out


if triton is not None:

    @triton.jit
    def _conv_tma_kernel(x_a, x_b, w_aa, w_ab, w_ba, w_bb, out_ptr, frames, height, width, tiles_w, tiles,
                         total_frames, bias_ptr, residual_ptr, norm_w_ptr, norm_ptr, norm_sb, norm_st, norm_sh,
                         norm_sw, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr, WRITE_NORM: tl.constexpr,
                         WRITE_OUT: tl.constexpr, C: tl.constexpr, COUT: tl.constexpr, BH: tl.constexpr,
                         BW: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr, N_A: tl.constexpr,
                         N_B: tl.constexpr, N_PROGRAMS: tl.constexpr, GROUP: tl.constexpr, DOT_FP32: tl.constexpr):
        BLOCK_M: tl.constexpr = BH * BW
        pid = tl.program_id(0)
        pid_n = pid % N_PROGRAMS
        pid_m = pid // N_PROGRAMS
        per_group = GROUP * tiles  # GROUP frames of one spatial tile run together (they re-read input frames)
        first = (pid_m // per_group) * GROUP
        group_size = tl.minimum(total_frames - first, GROUP)
        within = pid_m % per_group
        frame = first + within % group_size
        tile = within // group_size
        sample = frame // frames
        t = frame % frames
        h0 = (tile // tiles_w) * BH
        w0 = (tile % tiles_w) * BW
        n0 = pid_n * (N_A + N_B)
        acc_a = tl.zeros([BLOCK_M, N_A], dtype=tl.float32)
        acc_b = tl.zeros([BLOCK_M, N_B if N_B > 0 else 16], dtype=tl.float32)
        STEP: tl.constexpr = K_A + K_B
        BLOCKS: tl.constexpr = C // STEP
        for it in range(27 * BLOCKS):
            tap = it // BLOCKS
            c0 = (it - tap * BLOCKS) * STEP
            dt = tap // 9
            dh = (tap // 3) % 3 - 1
            dw = tap % 3 - 1
            k0 = tap * C + c0
            # the tap's tile: rows h0+dh.., columns w0+dw..; outside the frame the TMA unit reads zeros
            a = x_a.load([sample, t + dt, h0 + dh, w0 + dw, c0]).reshape(BLOCK_M, K_A)
            acc_a = mma(a, w_aa.load([k0, n0]), acc_a, DOT_FP32)
            if N_B > 0:
                acc_b = mma(a, w_ab.load([k0, n0 + N_A]), acc_b, DOT_FP32)
            if K_B > 0:
                a2 = x_b.load([sample, t + dt, h0 + dh, w0 + dw, c0 + K_A]).reshape(BLOCK_M, K_B)
                acc_a = mma(a2, w_ba.load([k0 + K_A, n0]), acc_a, DOT_FP32)
                if N_B > 0:
                    acc_b = mma(a2, w_bb.load([k0 + K_A, n0 + N_A]), acc_b, DOT_FP32)
        i = tl.arange(0, BLOCK_M)
        hh = h0 + i // BW
        ww = w0 + i % BW
        ok = ((hh < height) & (ww < width))[:, None]
        pos = (frame * height + hh) * width + ww
        col_a = n0 + tl.arange(0, N_A)[None, :]
        col_b = n0 + N_A + tl.arange(0, N_B if N_B > 0 else 16)[None, :]
        dtype = out_ptr.dtype.element_ty
        h_a = acc_a.to(dtype)
        h_b = acc_b.to(dtype)
        if HAS_BIAS or HAS_RESIDUAL:  # round(conv + bias + residual): the separate pass's arithmetic
            f_a = h_a.to(tl.float32)
            f_b = h_b.to(tl.float32)
            if HAS_BIAS:
                f_a += tl.load(bias_ptr + col_a)
                f_b += tl.load(bias_ptr + col_b)
            if HAS_RESIDUAL:
                f_a += tl.load(residual_ptr + pos[:, None] * COUT + col_a, mask=ok, other=0.0).to(tl.float32)
                f_b += tl.load(residual_ptr + pos[:, None] * COUT + col_b, mask=ok, other=0.0).to(tl.float32)
            h_a = f_a.to(dtype)
            h_b = f_b.to(dtype)
        if WRITE_OUT:
            tl.store(out_ptr + pos[:, None] * COUT + col_a, h_a, mask=ok)
            if N_B > 0:
                tl.store(out_ptr + pos[:, None] * COUT + col_b, h_b, mask=ok)
        if WRITE_NORM:  # the program holds every channel of its positions
            x32_a = h_a.to(tl.float32)
            x32_b = h_b.to(tl.float32)
            squares = tl.sum(x32_a * x32_a, axis=1)
            if N_B > 0:
                squares += tl.sum(x32_b * x32_b, axis=1)
            norm = tl.maximum(tl.sqrt(squares), 1e-12)[:, None]
            row = (sample * norm_sb + (t + 2) * norm_st + hh * norm_sh + ww * norm_sw)[:, None]
            y_a = x32_a / norm * tl.load(norm_w_ptr + col_a)
            y_a = y_a / (1.0 + tl.exp(-y_a))
            tl.store(norm_ptr + row + col_a, y_a.to(dtype), mask=ok)
            if N_B > 0:
                y_b = x32_b / norm * tl.load(norm_w_ptr + col_b)
                y_b = y_b / (1.0 + tl.exp(-y_b))
                tl.store(norm_ptr + row + col_b, y_b.to(dtype), mask=ok)
