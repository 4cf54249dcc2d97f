"""A Triton implicit-GEMM kernel for the fast encoder's causal 3x3x3 convolutions, offered as named plans.

The call (wan/fast_encoder.py, `_causal_conv`): input `padded` [B, C, T+2, H, W] bf16, channels-last 3D (memory
order B,T,H,W,C; its two leading frames are the causal padding, already in the buffer), weight
[Cout, C, 3, 3, 3], padding (0, 1, 1), stride 1, no bias, fp32 accumulation, output [B, Cout, T, H, W] bf16
channels-last 3D:

    out[b, n, t, h, w] = sum_{dt, dh, dw, c} padded[b, c, t + dt, h + dh - 1, w + dw - 1] * weight[n, c, dt, dh, dw]

with zeros where h + dh - 1 or w + dw - 1 falls outside the frame (t + dt never does: t indexes the padded
buffer). As a GEMM: M = B*T*H*W output positions (each a row of Cout contiguous channels), N = Cout,
K = 27 taps x C, where the A row of position (b, t, h, w) for tap (dt, dh, dw) is the C channels of input
position (b, t + dt, h + dh - 1, w + dw - 1), a constant offset from the row of tap (0, 1, 1). The weight is
rearranged once to `weight_taps` [27, C, Cout] (tap = 9 dt + 3 dh + dw, then input, then output channel).

One program computes BLOCK_M consecutive positions of one frame (flattened over its rows: a tile can span the
end of one image row and the start of the next) x a run of output channels given as one or two power-of-two
widths (96 = 64 + 32, 192 = 128 + 64): the two dots share the A tile, so no output lane is padded away (cuDNN's
Hopper kernels tile N by 64, so 96 channels cost 128 lanes). Several such runs (a grid axis over N) can cover
wider outputs (384 = 2 x (128 + 64), or 256 + 128 in one program). The K loop is one flat loop over taps x
channel blocks, so Triton's software pipeliner sees a single loop of loads feeding dots. fp32 accumulators,
one rounding at the store; a fixed K order, no split-K and no atomics, so the result is deterministic and a
config gives the same bits in every process. Programs are ordered so that GROUP consecutive frames of the same
spatial tile run together (tap dt of frame t reads input frame t + dt, which frames t + 1 and t + 2 read again).

planned_convs.PlannedConvs offers `candidates()` beside cuDNN's plans when it times a signature this kernel
covers (`covers()`), and records the winner by its plan name, `triton<version>:<config label>`: the Triton
version is part of the name because another version may compile the same config to other bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

try:  # Triton ships with CUDA builds of torch; without it no Triton plan is offered.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the torch build
    triton = tl = None

TAPS = 27
PLAN_PREFIX = "triton"


@dataclass(frozen=True)
class ConvConfig:
    """One program's tile and the launch: `block_m` output positions x sum(`n_split`) output channels (one or two
    power-of-two widths sharing the A tile; Cout / sum(n_split) programs along N), K in steps of sum(`k_split`)
    channels of one tap (one or two power-of-two widths), `group` frames per spatial tile in the launch order."""

    block_m: int = 128
    k_split: tuple[int, ...] = (32,)
    n_split: tuple[int, ...] = (64, 32)
    group: int = 4
    num_warps: int = 8
    num_stages: int = 4

    @property
    def label(self) -> str:
        k = "+".join(map(str, self.k_split))
        n = "+".join(map(str, self.n_split))
        return f"m{self.block_m}_k{k}_n{n}_g{self.group}_w{self.num_warps}_s{self.num_stages}"

    @classmethod
    def parse(cls, label: str) -> ConvConfig:
        fields = {part[0]: part[1:] for part in label.split("_")}
        return cls(int(fields["m"]), tuple(int(v) for v in fields["k"].split("+")),
                   tuple(int(v) for v in fields["n"].split("+")), int(fields.get("g", 4)),
                   int(fields.get("w", 8)), int(fields.get("s", 4)))

    def check(self, channels: int, out_channels: int) -> None:
        """Raises ValueError where the config cannot cover this conv exactly."""
        for name, widths in (("k_split", self.k_split), ("n_split", self.n_split), ("block_m", (self.block_m,))):
            if not 1 <= len(widths) <= 2 or any(v < 16 or v & (v - 1) for v in widths):
                raise ValueError(f"{name} {widths}: one or two powers of two, each at least 16")
        if channels % sum(self.k_split):
            raise ValueError(f"k_split {self.k_split} does not divide {channels} input channels")
        if out_channels % sum(self.n_split):
            raise ValueError(f"n_split {self.n_split} does not divide {out_channels} output channels")


def weight_taps(weight: torch.Tensor) -> torch.Tensor:
    """[Cout, C, 3, 3, 3] -> [27, C, Cout] contiguous, tap = 9 dt + 3 dh + dw."""
    out_channels, channels = weight.shape[:2]
    return weight.permute(2, 3, 4, 1, 0).reshape(TAPS, channels, out_channels).contiguous()


def conv3d_causal(padded: torch.Tensor, taps: torch.Tensor, config: ConvConfig) -> torch.Tensor:
    """The causal conv of `padded` [B, C, T+2, H, W] (channels contiguous) with `taps` [27, C, Cout]: a new
    [B, Cout, T, H, W] channels-last 3D tensor in padded's dtype."""
    if triton is None:
        raise RuntimeError("triton is not importable")
    batch, channels, padded_frames, height, width = padded.shape
    out_channels = taps.shape[2]
    if taps.shape != (TAPS, channels, out_channels) or not taps.is_contiguous():
        raise ValueError(f"taps {tuple(taps.shape)}: want a contiguous [27, {channels}, Cout]")
    if padded.stride(1) != 1:
        raise ValueError("padded must be channels-last (channel stride 1)")
    config.check(channels, out_channels)
    frames = padded_frames - 2
    out = torch.empty((batch, out_channels, frames, height, width), device=padded.device, dtype=padded.dtype,
                      memory_format=torch.channels_last_3d)
    last = sum((size - 1) * stride for size, stride in zip(padded.shape, padded.stride()))
    if max(last, out.numel()) >= 2**31:
        raise ValueError("offsets past 2**31 elements: the kernel computes them in int32")
    tiles = triton.cdiv(height * width, config.block_m)
    n_programs = out_channels // sum(config.n_split)
    k_a, k_b = (*config.k_split, 0)[:2]
    n_a, n_b = (*config.n_split, 0)[:2]
    grid = (batch * frames * tiles * n_programs,)
    _conv3d_causal_kernel[grid](
        padded, taps, out, frames, height, width, tiles, batch * frames,
        padded.stride(0), padded.stride(2), padded.stride(3), padded.stride(4),
        C=channels, COUT=out_channels, BLOCK_M=config.block_m, K_A=k_a, K_B=k_b, K_B_SHAPE=k_b or 16,
        N_A=n_a, N_B=n_b, N_B_SHAPE=n_b or 16, N_PROGRAMS=n_programs, GROUP=config.group,
        DOT_FP32=interpreting(),
        num_warps=config.num_warps, num_stages=config.num_stages)
    return out


if triton is not None:

    @triton.jit
    def _tap_tile(x_ptr, row, ok, c0, KW: tl.constexpr):
        """The A tile of one tap: KW channels from c0 of the rows `row` (masked rows read zeros)."""
        k = c0 + tl.arange(0, KW)
        return tl.load(x_ptr + row[:, None] + k[None, :], mask=ok[:, None], other=0.0)

    @triton.jit
    def _weight_tile(w_ptr, k0, n0, COUT: tl.constexpr, KW: tl.constexpr, NW: tl.constexpr):
        """Rows k0.. (of the [27 * C, Cout] weight) x columns n0.., KW x NW."""
        k = k0 + tl.arange(0, KW)
        n = n0 + tl.arange(0, NW)
        return tl.load(w_ptr + k[:, None] * COUT + n[None, :])

    @triton.jit
    def mma(a, b, acc, DOT_FP32: tl.constexpr):
        """acc + a @ b; DOT_FP32 (the interpreter, whose bf16 dot is wrong) widens the bf16 operands first, which
        is the same maths: a product of two bf16 values is exact in fp32."""
        if DOT_FP32:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        return tl.dot(a, b, acc)

    @triton.jit
    def _conv3d_causal_kernel(x_ptr, w_ptr, out_ptr, frames, height, width, tiles, total_frames, stride_b,
                              stride_t, stride_h, stride_w, C: tl.constexpr, COUT: tl.constexpr,
                              BLOCK_M: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr,
                              K_B_SHAPE: tl.constexpr, N_A: tl.constexpr, N_B: tl.constexpr,
                              N_B_SHAPE: tl.constexpr, N_PROGRAMS: tl.constexpr, GROUP: tl.constexpr,
                              DOT_FP32: tl.constexpr):
        # Launch order: the N programs of a tile are adjacent (they read the same A rows), then GROUP frames of
        # the same spatial tile, then the next tile.
        pid = tl.program_id(0)
        pid_n = pid % N_PROGRAMS
        pid_m = pid // N_PROGRAMS
        per_group = GROUP * tiles
        first = (pid_m // per_group) * GROUP
        group_size = tl.minimum(total_frames - first, GROUP)
        within = pid_m % per_group
        frame = first + within % group_size  # b * T + t
        tile = within // group_size
        sample = frame // frames
        t = frame % frames
        area = height * width
        pos = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = pos < area
        h = pos // width
        w = pos % width
        # Offset of input (b, t + 0, h, w): tap (dt, dh, dw) reads base + a per-tap scalar shift.
        base = sample * stride_b + t * stride_t + h * stride_h + w * stride_w
        n0 = pid_n * (N_A + N_B)
        acc_a = tl.zeros([BLOCK_M, N_A], dtype=tl.float32)
        acc_b = tl.zeros([BLOCK_M, N_B_SHAPE], dtype=tl.float32)
        STEP: tl.constexpr = K_A + K_B
        BLOCKS: tl.constexpr = C // STEP
        for it in range(27 * BLOCKS):
            tap = it // BLOCKS
            c0 = (it - tap * BLOCKS) * STEP
            dt = tap // 9
            dh = (tap // 3) % 3 - 1
            dw = tap % 3 - 1
            hh = h + dh
            ww = w + dw
            ok = row_ok & (hh >= 0) & (hh < height) & (ww >= 0) & (ww < width)
            row = base + (dt * stride_t + dh * stride_h + dw * stride_w)
            k0 = tap * C + c0
            a = _tap_tile(x_ptr, row, ok, c0, K_A)
            acc_a = mma(a, _weight_tile(w_ptr, k0, n0, COUT, K_A, N_A), acc_a, DOT_FP32)
            if N_B > 0:
                acc_b = mma(a, _weight_tile(w_ptr, k0, n0 + N_A, COUT, K_A, N_B_SHAPE), acc_b, DOT_FP32)
            if K_B > 0:
                a2 = _tap_tile(x_ptr, row, ok, c0 + K_A, K_B_SHAPE)
                acc_a = mma(a2, _weight_tile(w_ptr, k0 + K_A, n0, COUT, K_B_SHAPE, N_A), acc_a, DOT_FP32)
                if N_B > 0:
                    acc_b = mma(a2, _weight_tile(w_ptr, k0 + K_A, n0 + N_A, COUT, K_B_SHAPE, N_B_SHAPE), acc_b,
                                 DOT_FP32)
        out_row = (frame * area + pos) * COUT + n0
        tl.store(out_ptr + out_row[:, None] + tl.arange(0, N_A)[None, :], acc_a.to(out_ptr.dtype.element_ty),
                 mask=row_ok[:, None])
        if N_B > 0:
            tl.store(out_ptr + out_row[:, None] + N_A + tl.arange(0, N_B_SHAPE)[None, :],
                     acc_b.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])


def power_of_two_split(width: int) -> tuple[int, ...]:
    """width as one power of two, or the sum of two (96 = 64 + 32); () where it is neither."""
    high = 1 << (width.bit_length() - 1)
    rest = width - high
    return (width,) if not rest else (high, rest) if rest & (rest - 1) == 0 else ()


def candidates(channels: int, out_channels: int) -> list[ConvConfig]:
    """The configs a plan pass times for one conv (none where the kernel cannot tile it). From the H200 sweep of
    bench/kernels/conv_triton.py (triton 3.6): up to 192 output channels one program covers them all, BLOCK_M 128 with
    K steps of 32 and 4 warps (3 or 4 stages); wider, 256 + 128 in one program with 8 warps, or two programs of
    half the channels."""
    k = (32,) if channels % 32 == 0 else power_of_two_split(channels)
    whole = power_of_two_split(out_channels)
    half = power_of_two_split(out_channels // 2) if out_channels % 2 == 0 else ()
    configs = []
    if whole and out_channels <= 192:
        configs = [ConvConfig(128, k, whole, 4, 4, 4 if out_channels <= 96 else 3),
                   ConvConfig(128, k, whole, 8, 4, 3 if out_channels <= 96 else 4)]
    else:
        if whole and out_channels <= 384:
            configs.append(ConvConfig(128, k, whole, 8, 8, 3))
        if half and out_channels // 2 <= 256:
            configs.append(ConvConfig(128, k, half, 8, 4, 3))
    valid = []
    for config in configs:
        try:
            config.check(channels, out_channels)
        except ValueError:
            continue
        valid.append(config)
    return valid


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    return triton is not None and triton.knobs.runtime.interpret


def plan_name(config: ConvConfig) -> str:
    """The name a plan book records for this config under the running Triton."""
    return f"{PLAN_PREFIX}{triton.__version__}:{config.label}"


def is_plan_name(name: str) -> bool:
    return name.startswith(PLAN_PREFIX)


def config_of(name: str) -> ConvConfig:
    """The config of a recorded Triton plan name; RuntimeError when this process cannot run it as recorded."""
    version, _, label = name.removeprefix(PLAN_PREFIX).partition(":")
    running = triton.__version__ if triton is not None else None
    if version != running:
        raise RuntimeError(f"the recorded plan {name!r} was timed under Triton {version}, and this process has "
                           f"{'no Triton' if running is None else f'Triton {running}'}: another Triton may compile "
                           "it to other bits (use the software the build's plans were recorded with, or start "
                           "over with --overwrite)")
    return ConvConfig.parse(label)


def covers(x: torch.Tensor, weight: torch.Tensor, bias, stride, padding) -> bool:
    """Whether a conv call is the causal 3x3x3 conv this kernel computes (on a GPU with Triton)."""
    if triton is None or not x.is_cuda or x.dim() != 5 or x.dtype not in (torch.bfloat16, torch.float16):
        return False
    strides = (stride,) * 3 if isinstance(stride, int) else tuple(stride)
    pads = (padding,) * 3 if isinstance(padding, int) else tuple(padding)
    return (bias is None and tuple(weight.shape[2:]) == (3, 3, 3) and x.stride(1) == 1 and strides == (1, 1, 1)
            and pads == (0, 1, 1) and bool(candidates(x.shape[1], weight.shape[0])))



class TritonConvKernels:
    """The Triton family (ConvKernel): the causal 3x3x3 convs on a GPU with Triton."""

    family = PLAN_PREFIX
    environment_key = "triton"  # the fused kernels are compiled by it too, so the record holds it on any device
    requirements = "Triton (it ships with CUDA builds of torch)"

    def version(self, device: torch.device) -> str | None:
        return triton.__version__ if triton is not None else None

    def environment_version(self, device: torch.device) -> str:
        return str(triton.__version__) if triton is not None else "none"

    def available(self, device: torch.device) -> bool:
        return triton is not None and torch.device(device).type == "cuda"

    def owns(self, plan: str) -> bool:
        return is_plan_name(plan)

    def covers(self, x, weight, bias, stride, padding) -> bool:
        return covers(x, weight, bias, stride, padding)

    def candidates(self, x, weight, bias, stride, padding, prepared) -> dict:
        return {plan_name(config): _runner(config, prepared) for config in candidates(x.shape[1], weight.shape[0])}

    def runner(self, plan, key, x, weight, bias, stride, padding, prepared):
        if not covers(x, weight, bias, stride, padding):
            raise RuntimeError(f"the recorded plan {plan!r} for the convolution {key} is a Triton kernel, which "
                               "does not run this convolution here (no Triton, or not on a GPU)")
        return _runner(config_of(plan), prepared)


def _runner(config: ConvConfig, prepared: dict):
    def run(x, weight, bias):
        return conv3d_causal(x, _taps(weight, prepared), config)

    return run


def _taps(weight: torch.Tensor, prepared: dict) -> torch.Tensor:
    """The weight as the kernel reads it, made once per weight tensor (held with it in `prepared`, so its storage
    is not reused for another while the entry lives)."""
    key = ("triton taps", weight.data_ptr(), tuple(weight.shape), tuple(weight.stride()))
    if key not in prepared:
        prepared[key] = (weight, weight_taps(weight))
    return prepared[key][1]


FAMILY = TritonConvKernels()
