"""A Triton kernel for the fast encoder's first conv and the norm after it, timed against what the encoder runs.

The encoder (tokenizers/wan21_fast.py) stacks a window's frames into 16 channels (two copies), runs a 2-D cuDNN
conv by the plan a build records, then the fused pass that writes the first residual block's normalised input.
The kernel here does it in one pass: the first conv reads few channels (Wan2.1: 3 colours, Wan2.2: 12) and writes
many (96, 160), so it is bound by its output's bytes. One program computes BLOCK_M positions of one frame x all
output channels (one or two power-of-two widths sharing the A tile: 96 = 64 + 32) as an implicit GEMM with
K = 27 taps x input channels, zero-padded to whole K blocks, gathered straight from the frame-padded input with
positions along the fast axis (coalesced loads of a row's pixels). Its epilogue adds the bias, rounds once (the
conv output, the first block's shortcut) and, given the next norm's gain, writes silu(normalize(output) * gain)
into the next conv's frame-padded input: every position's channels are in the program's registers, so the norm
pass over the largest tensor of the encoder is not needed (the same maths as the fused pass, wan21_kernels).

Each row gives milliseconds per window, the bytes both outputs take at the copy rate (the floor), the rel-L2 of
the conv output against an fp32 conv, and whether two calls gave the same bits; the kernel's tiles are swept. A
measurement, not wired into the encoder (BENCHMARKS.md has the H200 numbers).

    python bench/first_conv.py --out first_conv.json          # Wan2.1's window: 41 frames of 480x832, 3 -> 96
    python bench/first_conv.py --tiny                         # CPU: the stacked path only (no Triton kernel)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _encode_probes import copy_bandwidth, timed  # noqa: E402
from _random_wan import random_wan_vae  # noqa: E402

from latentforge.tokenizers.triton_conv import interpreting, tl, triton  # noqa: E402
from latentforge.tokenizers.wan21_fast import FastWanEncoder, _channels_last  # noqa: E402
from latentforge.tokenizers.wan21_kernels import add_rms_silu  # noqa: E402

SWEEP = ((128, 4, 3), (64, 4, 3), (128, 8, 3), (256, 8, 3), (128, 4, 2), (64, 2, 2))  # (block_m, warps, stages)


def planned_convs(device: torch.device):
    """What a build runs each conv through: recorded plans on a GPU with the cuDNN frontend, else PyTorch's call."""
    if device.type == "cuda":
        from latentforge.tokenizers.cudnn_convs import PlannedConvs
        from latentforge.tokenizers.plan_book import PlanBook

        return PlannedConvs(PlanBook())
    return None


def rel_l2(value: torch.Tensor, reference: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(value.float() - reference) / torch.linalg.vector_norm(reference))


def run(args) -> dict:
    device = torch.device(args.device)
    vae = random_wan_vae(base_dim=args.base_dim).to(device)
    fast = FastWanEncoder(vae.encoder, vae.quant_conv, convs=planned_convs(device))
    p, norm = fast._params[0], fast._params[1]["norm1"]
    rows, bias = gemm_weight(vae.encoder.conv_in.weight.to(torch.bfloat16)), vae.encoder.conv_in.bias.float()
    generator = torch.Generator(device="cpu").manual_seed(0)
    window = (torch.rand(1, 3, args.frames, args.height, args.width, generator=generator) * 2 - 1)
    window = window.to(device, torch.bfloat16)
    out_channels = p["bias"].shape[0]
    with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True, allow_tf32=False):
        padded = F.pad(window.float(), (0, 0, 0, 0, 2, 0))
        reference = F.conv3d(padded, vae.encoder.conv_in.weight.float(), vae.encoder.conv_in.bias.float(),
                             padding=(0, 1, 1))
    shape = (1, out_channels, args.frames + 2, args.height, args.width)
    following = _channels_last(shape, window)

    def before():
        out = fast._conv_in(window, p, {}, 0)
        add_rms_silu(out, None, norm, following[:, :, 2:])
        return out

    modes = {"before: stacked frames, cuDNN 2-D conv, norm pass": before}
    if triton is not None and window.is_cuda:
        for block_m, warps, stages in SWEEP:
            modes[f"kernel m{block_m} w{warps} s{stages}"] = (
                lambda b=block_m, w=warps, s=stages: _kernel(window, rows, bias, norm, following, b, w, s))
        modes["kernel m64 w4 s3, conv output only"] = lambda: _kernel(window, rows, bias, None, None, 64, 4, 3)
    bandwidth = copy_bandwidth(device, 4.0) if device.type == "cuda" else None  # bytes/s read + written
    output_bytes = 2 * reference.numel() * 2  # the conv output and the normalised input, bf16
    rows = []
    for name, fn in modes.items():
        first, second = fn(), fn()
        seconds, _, _ = timed(fn, device, args.reps)
        row = {"mode": name, "ms": seconds * 1e3, "rel_l2_vs_fp32": rel_l2(first, reference),
               "same_bits_twice": torch.equal(first, second),
               "floor_ms": output_bytes / bandwidth * 1e3 if bandwidth else None}
        rows.append(row)
        print(f"  {name:<52} {row['ms']:8.3f} ms  relL2 {row['rel_l2_vs_fp32']:.3e}  same bits "
              f"{row['same_bits_twice']}", flush=True)
    return {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__,
            "window": [args.frames, args.height, args.width], "out_channels": out_channels,
            "copy_gb_s": bandwidth and bandwidth / 1e9, "rows": rows}


def _kernel(window, rows, bias, norm, following, block_m, warps, stages):
    """The kernel on a first window (two zero frames in front)."""
    padded = F.pad(window, (0, 0, 0, 0, 2, 0))
    gain = norm.reshape(-1) if norm is not None else None
    target = following[:, :, 2:] if following is not None else None
    return first_conv(padded, rows, bias, gain, target, block_m=block_m, warps=warps, stages=stages)


TAPS = 27
BLOCK_M = 128
BLOCK_K = 32


def channel_split(channels: int) -> tuple[int, int]:
    """channels as one power of two (and 0) or the sum of two, each at least 16 (96 = 64 + 32, 160 = 128 + 32)."""
    high = 1 << (channels.bit_length() - 1)
    rest = channels - high
    if channels < 16 or (rest and (rest < 16 or rest & (rest - 1))):
        raise ValueError(f"{channels} output channels are not one or two powers of two of at least 16")
    return high, rest


def gemm_weight(weight: torch.Tensor) -> torch.Tensor:
    """[Cout, C, 3, 3, 3] -> [K, Cout] contiguous with k = tap * C + c (tap = 9 dt + 3 dh + dw), zero rows up to a
    whole number of K blocks."""
    out_channels, channels = weight.shape[:2]
    rows = weight.permute(2, 3, 4, 1, 0).reshape(TAPS * channels, out_channels)
    padded = rows.new_zeros((-(-rows.shape[0] // BLOCK_K) * BLOCK_K, out_channels))
    padded[: rows.shape[0]] = rows
    return padded.contiguous()


def first_conv(padded: torch.Tensor, weight_rows: torch.Tensor, bias: torch.Tensor,
               norm_gain: torch.Tensor | None = None, normed: torch.Tensor | None = None, *,
               block_m: int = BLOCK_M, warps: int = 4, stages: int = 3) -> torch.Tensor:
    """The causal conv of `padded` [B, C, T+2, H, W] (any strides; its first two frames are the causal padding)
    with `weight_rows` (gemm_weight) plus `bias` (fp32, [Cout]): a new [B, Cout, T, H, W] channels-last 3D tensor
    in padded's dtype. With `norm_gain` (fp32, [Cout]), silu(normalize(out over channels) * norm_gain) is written
    into `normed` ([B, Cout, T, H, W], channels contiguous, rows at any strides)."""
    batch, channels, padded_frames, height, width = padded.shape
    out_channels = weight_rows.shape[1]
    n_a, n_b = channel_split(out_channels)
    frames = padded_frames - 2
    out = torch.empty((batch, out_channels, frames, height, width), device=padded.device, dtype=padded.dtype,
                      memory_format=torch.channels_last_3d)
    if (norm_gain is None) != (normed is None):
        raise ValueError("norm_gain and normed come together")
    if normed is not None and (normed.shape != out.shape or normed.stride(1) != 1):
        raise ValueError(f"normed {tuple(normed.shape)}: want {tuple(out.shape)} with contiguous channels")
    target = normed if normed is not None else out
    tiles = triton.cdiv(height * width, block_m)
    _first_conv_kernel[(batch * frames * tiles,)](
        padded, weight_rows, bias, out, norm_gain if norm_gain is not None else bias, target,
        frames, height, width, tiles, *padded.stride(), target.stride(0), target.stride(2), target.stride(3),
        target.stride(4), C=channels, COUT=out_channels, K_BLOCKS=weight_rows.shape[0] // BLOCK_K,
        BLOCK_M=block_m, BLOCK_K=BLOCK_K, N_A=n_a, N_B=n_b, N_B_SHAPE=n_b or 16, NORM=normed is not None,
        DOT_FP32=interpreting(), num_warps=warps, num_stages=stages)
    return out


if triton is not None:
    from latentforge.tokenizers.triton_conv import mma

    @triton.jit
    def _first_conv_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, gain_ptr, normed_ptr, frames, height, width, tiles,
                           stride_b, stride_c, stride_t, stride_h, stride_w, normed_b, normed_t, normed_h, normed_w,
                           C: tl.constexpr, COUT: tl.constexpr, K_BLOCKS: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_K: tl.constexpr, N_A: tl.constexpr, N_B: tl.constexpr, N_B_SHAPE: tl.constexpr,
                           NORM: tl.constexpr, DOT_FP32: tl.constexpr):
        pid = tl.program_id(0)
        frame = pid // tiles  # b * T + t
        tile = pid % tiles
        sample = frame // frames
        t = frame % frames
        area = height * width
        pos = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = pos < area
        h = pos // width
        w = pos % width
        base = sample * stride_b + t * stride_t + h * stride_h + w * stride_w  # input (b, t + 0, h, w)
        acc_a = tl.zeros([BLOCK_M, N_A], dtype=tl.float32)
        acc_b = tl.zeros([BLOCK_M, N_B_SHAPE], dtype=tl.float32)
        for block in range(K_BLOCKS):
            k = block * BLOCK_K + tl.arange(0, BLOCK_K)
            tap = k // C
            c = k % C
            dh = (tap // 3) % 3 - 1
            dw = tap % 3 - 1
            # gathered as [K, M], positions along the fast axis: a warp's loads are consecutive pixels of a row
            hh = h[None, :] + dh[:, None]
            ww = w[None, :] + dw[:, None]
            ok = (row_ok[None, :] & (tap < 27)[:, None] & (hh >= 0) & (hh < height) & (ww >= 0)
                  & (ww < width))
            shift = c * stride_c + (tap // 9) * stride_t + dh * stride_h + dw * stride_w
            a = tl.trans(tl.load(x_ptr + base[None, :] + shift[:, None], mask=ok, other=0.0))
            n = tl.arange(0, N_A)
            acc_a = mma(a, tl.load(w_ptr + k[:, None] * COUT + n[None, :]), acc_a, DOT_FP32)
            if N_B > 0:
                n2 = N_A + tl.arange(0, N_B_SHAPE)
                acc_b = mma(a, tl.load(w_ptr + k[:, None] * COUT + n2[None, :]), acc_b, DOT_FP32)
        row = (frame * area + pos).to(tl.int64) * COUT
        col_a = tl.arange(0, N_A)
        col_b = N_A + tl.arange(0, N_B_SHAPE)
        y_a = (acc_a + tl.load(bias_ptr + col_a)[None, :]).to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + row[:, None] + col_a[None, :], y_a, mask=row_ok[:, None])
        if N_B > 0:
            y_b = (acc_b + tl.load(bias_ptr + col_b)[None, :]).to(out_ptr.dtype.element_ty)
            tl.store(out_ptr + row[:, None] + col_b[None, :], y_b, mask=row_ok[:, None])
        if NORM:
            a32 = y_a.to(tl.float32)
            squares = tl.sum(a32 * a32, axis=1)
            if N_B > 0:
                b32 = y_b.to(tl.float32)
                squares += tl.sum(b32 * b32, axis=1)
            norm = tl.maximum(tl.sqrt(squares), 1e-12)[:, None]
            target = (sample.to(tl.int64) * normed_b + t.to(tl.int64) * normed_t + h * normed_h + w * normed_w)[:, None]
            z_a = a32 / norm * tl.load(gain_ptr + col_a)[None, :]
            z_a = z_a / (1.0 + tl.exp(-z_a))
            tl.store(normed_ptr + target + col_a[None, :], z_a.to(normed_ptr.dtype.element_ty), mask=row_ok[:, None])
            if N_B > 0:
                z_b = b32 / norm * tl.load(gain_ptr + col_b)[None, :]
                z_b = z_b / (1.0 + tl.exp(-z_b))
                tl.store(normed_ptr + target + col_b[None, :], z_b.to(normed_ptr.dtype.element_ty),
                         mask=row_ok[:, None])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--frames", type=int, default=41, help="output frames of the window (the build's: 41)")
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=832)
    parser.add_argument("--base-dim", type=int, default=96)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out")
    parser.add_argument("--tiny", action="store_true", help="CPU, a width-8 VAE, 3 frames of 16x24")
    args = parser.parse_args(argv)
    if args.tiny:
        args.device, args.frames, args.height, args.width, args.base_dim, args.reps = "cpu", 3, 16, 24, 8, 2
    started = time.perf_counter()
    with torch.inference_mode():
        result = run(args)
    result["wall_s"] = time.perf_counter() - started
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
