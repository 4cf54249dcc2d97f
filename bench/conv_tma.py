"""The encoder's causal 3x3x3 conv with TMA tile loads, and with the next norm pass in its epilogue, against cuDNN.

An experiment, not a plan the encoder runs. The implicit-GEMM kernel of tokenizers/triton_conv.py gathers its A
rows with masked pointer loads; this one loads each tap's tile with a TMA descriptor over the padded input
[B, T+2, H, W, C]: a box of BH x BW positions of one frame (x a block of channels) whose out-of-frame rows and
columns the hardware fills with zeros, so the spatial padding costs no masks. One program holds BH*BW positions x
every output channel (96 = 64 + 32 as two dots sharing the A tile), so the encoder's next pass
(wan21_kernels.add_rms_silu: bias, residual, RMS norm over the channels, SiLU) can run on the tile before it is
stored: the "fused" rows, against the same conv followed by the separate pass, in the two forms the encoder needs
(after a block's first conv: bias + norm into the next conv's frame-padded buffer; after its second: bias +
residual, the sum and its norm). Every row checks its bits twice and against an fp32 conv; a fused row counts the
norm values that differ from the separate pass (the sum of squares added in another order).

    python bench/conv_tma.py --out tma.json                  # H200: a tile/K/warps/stages sweep per shape
    python bench/conv_tma.py --shape 96,96,16,480,832 --config "96,96,16,480,832=tma4x32_k32_n64+32_g4_w8_s3"
    TRITON_INTERPRET=1 python bench/conv_tma.py --tiny      # CPU: the kernels through Triton's interpreter
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conv_triton import ConvShape, _format, _row, _twice, matmul_rate, measure_baseline, timed  # noqa: E402

from latentforge.tokenizers.triton_conv import ConvConfig, conv3d_causal, interpreting, triton, weight_taps  # noqa: E402
from latentforge.tokenizers.wan21_kernels import add_rms_silu  # noqa: E402

if triton is not None:
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

DEFAULT_SHAPES = ("96,96,16,480,832", "96,192,16,240,416", "192,192,16,240,416")
TINY_SHAPE = "32,48,2,9,13"
TINY_CONFIGS = ("tma2x8_k16_n32+16_g2_w4_s2", "tma4x8_k16+16_n32+16_g1_w4_s2")
TINY_POINTER_CONFIG = "m64_k16_n32+16_g2_w4_s2"


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
    def _mma(a, b, acc, DOT_FP32: tl.constexpr):
        if DOT_FP32:  # the interpreter's bf16 dot is wrong; a product of two bf16 values is exact in fp32
            return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        return tl.dot(a, b, acc)

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
            acc_a = _mma(a, w_aa.load([k0, n0]), acc_a, DOT_FP32)
            if N_B > 0:
                acc_b = _mma(a, w_ab.load([k0, n0 + N_A]), acc_b, DOT_FP32)
            if K_B > 0:
                a2 = x_b.load([sample, t + dt, h0 + dh, w0 + dw, c0 + K_A]).reshape(BLOCK_M, K_B)
                acc_a = _mma(a2, w_ba.load([k0 + K_A, n0]), acc_a, DOT_FP32)
                if N_B > 0:
                    acc_b = _mma(a2, w_bb.load([k0 + K_A, n0 + N_A]), acc_b, DOT_FP32)
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


def sweep(channels: int, out_channels: int) -> list[TmaConfig]:
    """Tiles of 128 positions (1x128 to 8x16) on 4 warps and of 256 (2x128, 4x64) on 8; K steps of 32 or a whole
    tap (64 + 32) / 64; 3 or 4 stages. One program covers 96 (64 + 32) or 192 (128 + 64) output channels."""
    n = (64, 32) if out_channels == 96 else (128, 64) if out_channels == 192 else (out_channels,)
    ks = [(32,), (64, 32)] if channels == 96 else [(32,), (64,)]
    tiles = ((1, 128), (2, 64), (4, 32), (8, 16), (2, 128), (4, 64)) if out_channels <= 96 else (
        (1, 128), (4, 32), (2, 128))
    configs = []
    for bh, bw in tiles:
        warps = 4 if bh * bw == 128 else 8
        configs += [TmaConfig(bh, bw, k, n, 4, warps, stages) for k in ks for stages in (3, 4)]
    return configs


def pointer_configs(out_channels: int) -> list[ConvConfig]:
    """The encoder's Triton kernel (masked pointer loads) in the two configs a plan pass times."""
    n = (64, 32) if out_channels == 96 else (128, 64)
    return [ConvConfig(128, (32,), n, 4, 4, 4), ConvConfig(128, (32,), n, 8, 4, 3)]


def fused_rows(shape: ConvShape, x, w, taps, conv, configs: list[TmaConfig], args) -> list[dict]:
    """Each config with the encoder's next pass in its epilogue, against it and cuDNN's plan followed by the
    separate pass (add_rms_silu), after a block's first conv (bias + norm) and its second (bias + residual: the sum
    and its norm)."""
    device = x.device
    generator = torch.Generator(device="cpu").manual_seed(2)
    cout = shape.out_channels
    bias = (torch.rand(cout, generator=generator) * 0.2 - 0.1).to(device)
    gains = ((torch.rand(cout, generator=generator) + 0.5) * cout**0.5).to(device)
    residual_input = torch.randn(shape.batch, cout, shape.frames, shape.height, shape.width,
                                 generator=generator).to(device, torch.bfloat16).contiguous(
        memory_format=torch.channels_last_3d)
    following = torch.zeros(shape.batch, cout, shape.frames + 2, shape.height, shape.width, device=device,
                            dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    sums = torch.zeros_like(residual_input)
    rows = []

    def separate(run_conv, residual):
        def run():
            add_rms_silu(run_conv(), residual, gains, following[:, :, 2:],
                         sum_out=sums if residual is not None else None, bias=bias)
        return run

    for case, residual in (("after conv1: bias + norm", None), ("after conv2: bias + residual, sum + norm",
                                                               residual_input)):
        runs = {"cuDNN plan + separate pass": separate(lambda: conv(x, w), residual)}
        for cfg in configs:
            runs[f"{cfg.label} + separate pass"] = separate(lambda c=cfg: conv3d_tma(x, taps, c), residual)
            runs[f"{cfg.label} fused"] = (lambda c=cfg, r=residual: conv3d_tma(
                x, taps, c, bias=bias, residual=r, norm_weight=gains, norm_out=following, write_out=r is not None))
        outputs = {}
        for name, run in runs.items():
            try:
                run()
                first = (following.clone(), sums.clone())
                run()
                again = (following.clone(), sums.clone())
                seconds = timed(run, device, args.reps, args.warmup)
                outputs[name] = first
                row = {"case": case, "run": name, "ms": seconds * 1e3,
                       "same_bits_twice": all(torch.equal(a, b) for a, b in zip(first, again))}
                unfused = outputs.get(name.replace(" fused", " + separate pass"))
                if name.endswith(" fused") and unfused is not None:
                    gap = (first[0].float() - unfused[0].float()).abs()
                    row.update(norm_values_differing=int((gap > 0).sum()), norm_max_abs_diff=float(gap.max()),
                               sum_equal=torch.equal(first[1], unfused[1]) if residual is not None else None)
            except Exception as error:  # noqa: BLE001 - a config that fails to compile or run is a row
                traceback.print_exc(limit=2)
                row = {"case": case, "run": name, "error": f"{type(error).__name__}: {error}"[:300]}
            rows.append(row)
            print(f"    {_format_fused(row)}", flush=True)
    return rows


def _format_fused(row: dict) -> str:
    if "error" in row:
        return f"{row['case'][:40]:<40} {row['run'][:44]:<44} ERROR {row['error'][:120]}"
    extra = ""
    if "norm_values_differing" in row:
        extra = f" norm values differing {row['norm_values_differing']} (max {row['norm_max_abs_diff']:.3g})"
        extra += f", sum equal {row['sum_equal']}" if row["sum_equal"] is not None else ""
    return f"{row['case'][:40]:<40} {row['run'][:44]:<44} {row['ms']:8.3f} ms same bits {row['same_bits_twice']}{extra}"


def run_shape(text: str, configs: list[TmaConfig], pointers: list[ConvConfig], fuse: list[TmaConfig] | None,
              matmul, args) -> dict:
    shape = ConvShape.parse(text)
    print(shape.describe(), flush=True)
    device = torch.device(args.device)
    measured = measure_baseline(shape, args, matmul)
    x, w, reference, base, base_seconds = measured.x, measured.w, measured.reference, measured.out, measured.seconds
    rows = [measured.row]
    print(f"  {_format(rows[0])}", flush=True)
    taps = weight_taps(w)
    kernels = [(f"pointer {c.label}", lambda c=c: conv3d_causal(x, taps, c)) for c in pointers]
    kernels += [(c.label, lambda c=c: conv3d_tma(x, taps, c)) for c in configs]
    for name, kernel in kernels:
        try:
            first, second, seconds = _twice(kernel, device, args)
            row = _row(name, seconds, shape, first, second, base, reference, base_seconds, matmul)
        except Exception as error:  # noqa: BLE001 - a config that fails to compile or run is a row
            traceback.print_exc(limit=2)
            row = {"config": name, "error": f"{type(error).__name__}: {error}"[:300]}
        rows.append(row)
        print(f"  {_format(row)}", flush=True)
    if fuse is None:  # the three fastest TMA configs that gave the same bits twice
        ranked = sorted((r for r in rows if r.get("same_bits_twice") and r["config"].startswith("tma")),
                        key=lambda r: r["seconds"])
        fuse = [TmaConfig.parse(r["config"]) for r in ranked[:3]]
    fused = fused_rows(shape, x, w, taps, measured.conv, fuse, args) if shape.out_channels <= 192 else []
    return {"shape": text, "conv": shape.describe(), "rows": rows, "fused": fused}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append",
                        help=f"input channels,output channels,output frames,height,width (default "
                             f"{' '.join(DEFAULT_SHAPES)})")
    parser.add_argument("--config", action="append", default=[],
                        help="SHAPE=LABEL,LABEL: time only these TMA configs at that shape, alone and fused")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tiny", action="store_true",
                        help=f"CPU, the conv {TINY_SHAPE} (needs TRITON_INTERPRET=1)")
    args = parser.parse_args(argv)
    if triton is None:
        print("triton is not importable: nothing to run", file=sys.stderr)
        return 2
    args.device = "cpu" if args.tiny else "cuda"
    if args.tiny:  # the interpreter takes seconds a call: one timed call each
        args.reps, args.warmup = 1, 0
    if args.tiny and not interpreting():
        print("--tiny runs the kernels through Triton's interpreter: set TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    if not args.tiny and not torch.cuda.is_available():
        print("no CUDA device (use --tiny with TRITON_INTERPRET=1)", file=sys.stderr)
        return 2
    chosen = dict(item.split("=", 1) for item in args.config)
    shapes = [TINY_SHAPE] if args.tiny else args.shape or list(DEFAULT_SHAPES)
    matmul = matmul_rate(torch.device(args.device), args.reps)
    result = {"device": torch.cuda.get_device_name() if not args.tiny else "cpu (interpreter)",
              "torch": torch.__version__, "triton": triton.__version__, "matmul_tflops": matmul, "shapes": []}
    for text in shapes:
        shape = ConvShape.parse(text)
        if args.tiny:
            configs = [TmaConfig.parse(label) for label in TINY_CONFIGS]
            pointers, fuse = [ConvConfig.parse(TINY_POINTER_CONFIG)], configs
        elif text in chosen:
            configs = [TmaConfig.parse(label) for label in chosen[text].split(",")]
            pointers, fuse = [], configs
        else:
            configs, pointers, fuse = sweep(shape.channels, shape.out_channels), pointer_configs(
                shape.out_channels), None
        result["shapes"].append(run_shape(text, configs, pointers, fuse, matmul, args))
        if args.out:  # after every shape: a run cut short keeps what it measured
            args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
