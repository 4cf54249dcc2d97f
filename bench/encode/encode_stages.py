"""Where the fast Wan2.1 encode spends its time, layer by layer, against each layer's floor.

One encode of the build path (bf16, recorded cuDNN plans) runs with a CUDA event at every boundary between its
convolutions, fused norm passes and the rest (padding, caches, copies, attention); each interval is charged to the
layer and the kind of work it belongs to. Beside each layer: its FLOPs at the bf16 matmul rate and its bytes at the
copy bandwidth, both measured in the same run (the floor of a convolution or a norm pass is the larger of the two),
and each convolution timed alone through the same plans (the cuDNN ceiling). A profile of the same encode says how
much of the wall time the GPU was busy. `--tiny` runs every code path on the CPU in seconds.

    python bench/encode/encode_stages.py --out stages.json
    python bench/encode/encode_stages.py --tiny
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_common"))

from _encode_probes import copy_bandwidth, matmul_tflops, timed  # noqa: E402
from _random_wan import random_wan_vae  # noqa: E402
from encode import add_clip_arguments, encoder_flops, load_clips, tiny_clip  # noqa: E402

from latentforge.tokenizers.base import pixels_to_input  # noqa: E402
from latentforge.tokenizers.wan import fast_encoder  # noqa: E402

OUTSIDE = -1  # work outside any layer: the window split, the output concatenation
# FastWanEncoder's per-layer methods; each takes its layer's parameters (or a part of them) as an argument
_METHODS = ("_conv_in", "_causal_conv", "_resblock_and_input", "_residual_down", "_down_spatial", "_down_time",
            "_attention")


def _owners(params: list[dict]) -> dict[int, int]:
    """id() of every dict, list and tensor in the encoder's prepared parameters -> its layer's index."""
    owner: dict[int, int] = {}

    def walk(obj, index: int) -> None:
        owner[id(obj)] = index
        if isinstance(obj, dict):
            for value in obj.values():
                walk(value, index)
        elif isinstance(obj, (list, tuple)):
            for value in obj:
                walk(value, index)

    for index, entry in enumerate(params):
        walk(entry, index)
    return owner


def _bytes(*tensors: torch.Tensor | None) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


@dataclass
class Timeline:
    """Marks (event or clock, label) in launch order; each interval is charged to the label of its first mark."""

    device: torch.device
    marks: list = field(default_factory=list)
    stack: list = field(default_factory=lambda: [(OUTSIDE, "other")])
    last_layer: int = OUTSIDE
    flops: dict = field(default_factory=lambda: defaultdict(float))
    moved: dict = field(default_factory=lambda: defaultdict(float))
    floor_s: dict = field(default_factory=lambda: defaultdict(float))  # per op max(flop floor, byte floor)
    convs: dict = field(default_factory=dict)  # (layer, signature) -> [calls, x's shape, weight, ..., layer]

    def mark(self, label) -> None:
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append((event, label))
        else:
            self.marks.append((time.perf_counter(), label))

    def enter(self, label) -> None:
        self.stack.append(label)
        self.mark(label)

    def leave(self) -> None:
        layer = self.stack.pop()[0]
        if len(self.stack) == 1:
            self.last_layer = layer
        self.mark(self.stack[-1])

    def layer_now(self) -> int:
        """The layer being run, or (between layers) the last one: its pending bias and residual get added."""
        return self.stack[-1][0] if len(self.stack) > 1 else self.last_layer

    def seconds(self) -> dict:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        spent: dict = defaultdict(float)
        for (start, label), (end, _) in zip(self.marks, self.marks[1:]):
            spent[label] += start.elapsed_time(end) / 1e3 if self.device.type == "cuda" else end - start
        return spent


class Instrumented:
    """Patches one FastWanEncoder (and the fused-norm function it calls) to log into a Timeline while in use."""

    def __init__(self, fast: fast_encoder.FastWanEncoder, timeline: Timeline, rate: float, bandwidth: float):
        self.fast, self.timeline, self.rate, self.bandwidth = fast, timeline, rate, bandwidth
        self.owner = _owners(fast._params)

    def __enter__(self) -> Timeline:
        fast, line = self.fast, self.timeline
        self._convs, self._norm = fast.convs, fast_encoder.add_rms_silu
        for name in _METHODS:
            setattr(fast, name, self._method(getattr(fast, name)))
        fast.convs = self._conv
        fast_encoder.add_rms_silu = self._add_rms_silu
        line.mark(line.stack[-1])
        return line

    def __exit__(self, *exc) -> None:
        self.timeline.mark(self.timeline.stack[-1])
        for name in _METHODS:
            delattr(self.fast, name)
        self.fast.convs, fast_encoder.add_rms_silu = self._convs, self._norm

    def _charge(self, layer: int, flops: float, moved: int) -> None:
        line = self.timeline
        line.flops[layer] += flops
        line.moved[layer] += moved
        line.floor_s[layer] += max(flops / self.rate, moved / self.bandwidth)

    def _method(self, method):
        def run(x, p, *rest, **options):
            part = rest[0] if method.__name__ == "_causal_conv" else p  # (x, norm, conv, ...): the conv's layer
            self.timeline.enter((self.owner.get(id(part), OUTSIDE), "other"))
            try:
                return method(x, p, *rest, **options)
            finally:
                self.timeline.leave()

        return run

    def _conv(self, x, weight, bias, stride, padding):
        layer = self.owner.get(id(weight), OUTSIDE)
        self.timeline.enter((layer, "conv"))
        out = self._convs(x, weight, bias, stride, padding)
        self.timeline.leave()
        self._charge(layer, 2.0 * out.numel() * weight[0].numel(), _bytes(x, weight, out))
        key = (layer, tuple(x.shape), tuple(x.stride()), tuple(weight.shape), str(stride), str(padding),
               bias is not None)
        shape = (x.size(), x.stride(), x.dtype)  # not x itself: an encode's inputs would all stay alive
        entry = self.timeline.convs.setdefault(key, [0, shape, weight, bias, stride, padding, layer])
        entry[0] += 1
        return out

    def _add_rms_silu(self, a, b, weight, norm_out, sum_out=None, bias=None):
        layer = self.owner.get(id(weight), OUTSIDE) if weight is not None else self.timeline.layer_now()
        self.timeline.enter((layer, "norm"))
        self._norm(a, b, weight, norm_out, sum_out=sum_out, bias=bias)
        self.timeline.leave()
        self._charge(layer, 0.0, _bytes(a, b, norm_out, sum_out))


def conv_alone(timeline: Timeline, convs, device: torch.device, reps: int) -> dict[int, float]:
    """Each convolution signature met, timed alone through the same plans on random operands of the same
    strides, times its calls, summed per layer: what the encode's convolutions cost at cuDNN's own speed."""
    per_layer: dict[int, float] = defaultdict(float)
    for calls, (size, strides, dtype), weight, bias, stride, padding, layer in timeline.convs.values():
        probe = torch.empty_strided(size, strides, dtype=dtype, device=device).normal_()
        seconds, _, _ = timed(lambda: convs(probe, weight, bias, stride, padding), device, reps)
        per_layer[layer] += seconds * calls
    return per_layer


def busy_seconds(encode, video: torch.Tensor) -> float:
    """GPU kernel time of one (warm) encode, from torch's profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        encode(video)
        torch.cuda.synchronize()
    return sum(getattr(e, "self_device_time_total", 0.0) for e in prof.key_averages()) / 1e6


def layer_names(fast: fast_encoder.FastWanEncoder, timeline: Timeline) -> dict[int, str]:
    """'03 resblock 96->96 @480x832' per layer: its kind, channels and the size its first convolution reads."""
    sizes: dict[int, str] = {}
    for _, (size, _, _), weight, _, _, _, layer in timeline.convs.values():
        sizes.setdefault(layer, f"{weight.shape[1]}->{weight.shape[0]} @{size[-2]}x{size[-1]}")
    kinds = [kind for kind, _ in fast.layers] + ["quant"]
    names = {index: f"{index:02d} {kind} {sizes.get(index, '')}".strip() for index, kind in enumerate(kinds)}
    names[OUTSIDE] = "-- outside layers"
    return names


def measure(args: argparse.Namespace) -> dict:
    from latentforge.tokenizers.wan.wan21 import Wan21Tokenizer

    device = torch.device(args.device)
    vae = random_wan_vae(base_dim=args.base_dim)
    checkpoint = Path(args.workdir) / "wan21-random"
    vae.save_pretrained(checkpoint)
    tokenizer = Wan21Tokenizer(str(checkpoint), precision="bf16", device=device,
                               conv_plans_dir=str(Path(args.workdir) / "conv-plans"))
    fast = tokenizer._fast
    clip = load_clips(args.clips_dir, 1, args.frames, args.height, args.width)[0]
    video = pixels_to_input(clip, device)[None]
    rate = matmul_tflops(device, 8192 if device.type == "cuda" else 512) * 1e12
    bandwidth = copy_bandwidth(device, 2.0 if device.type == "cuda" else 0.05)
    plain_s, peak, _ = timed(lambda: tokenizer.encode(video), device, args.reps)  # warms the plans up too
    spent: dict = defaultdict(float)
    for _ in range(args.reps):
        line = Timeline(device)
        with Instrumented(fast, line, rate, bandwidth):
            tokenizer.encode(video)
        for label, seconds in line.seconds().items():
            spent[label] += seconds / args.reps
    alone = conv_alone(line, fast.convs, device, args.reps)
    busy = busy_seconds(tokenizer.encode, video) if device.type == "cuda" else None
    names = layer_names(fast, line)
    layers = []
    for index in sorted({layer for layer, _ in spent}):
        parts = {kind: spent.get((index, kind), 0.0) for kind in ("conv", "norm", "other")}
        layers.append({"layer": names[index], **{f"{k}_s": v for k, v in parts.items()},
                       "total_s": sum(parts.values()), "gflop": line.flops[index] / 1e9,
                       "gb_moved": line.moved[index] / 1e9, "floor_s": line.floor_s[index],
                       "conv_alone_s": alone.get(index, 0.0)})
    flops = encoder_flops(args.frames, args.height, args.width, args.base_dim)
    return {
        "machine": {"device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor(),
                    "torch": torch.__version__},
        "shape": f"{args.frames}x{args.height}x{args.width}", "base_dim": args.base_dim,
        "matmul_bf16_tflops": rate / 1e12, "copy_gb_per_s": bandwidth / 1e9,
        "encode_s": plain_s, "peak_gib": peak, "instrumented_s": sum(spent.values()), "gpu_busy_s": busy,
        "encoder_tflop": flops / 1e12, "counted_tflop": sum(line.flops.values()) / 1e12, "layers": layers,
    }


def print_table(r: dict) -> None:
    print(f"{r['machine']['device']}  {r['shape']} base_dim {r['base_dim']}: bf16 matmul "
          f"{r['matmul_bf16_tflops']:.0f} TFLOP/s, copy {r['copy_gb_per_s']:.0f} GB/s; encoder "
          f"{r['encoder_tflop']:.2f} TFLOP (convs counted: {r['counted_tflop']:.2f})")
    busy = f"{r['gpu_busy_s']:.4f}" if r["gpu_busy_s"] is not None else "-"
    print(f"encode {r['encode_s']:.4f} s (peak {r['peak_gib']:.2f} GiB); instrumented {r['instrumented_s']:.4f} s; "
          f"GPU busy {busy} s")
    head = (f"{'layer':<40} {'total':>8} {'%':>5} {'conv':>8} {'alone':>8} {'norm':>8} {'other':>8} "
            f"{'GFLOP':>8} {'GB':>7} {'floor':>8} {'gap':>8}")
    print(head)
    total = sum(row["total_s"] for row in r["layers"]) or 1.0
    sums: dict = defaultdict(float)
    for row in r["layers"]:
        print(f"{row['layer']:<40} {row['total_s']:8.4f} {100 * row['total_s'] / total:5.1f} {row['conv_s']:8.4f} "
              f"{row['conv_alone_s']:8.4f} {row['norm_s']:8.4f} {row['other_s']:8.4f} {row['gflop']:8.1f} "
              f"{row['gb_moved']:7.2f} {row['floor_s']:8.4f} {row['total_s'] - row['floor_s']:8.4f}")
        for key in ("total_s", "conv_s", "conv_alone_s", "norm_s", "other_s", "gflop", "gb_moved", "floor_s"):
            sums[key] += row[key]
    print(f"{'all':<40} {sums['total_s']:8.4f} {100.0:5.1f} {sums['conv_s']:8.4f} {sums['conv_alone_s']:8.4f} "
          f"{sums['norm_s']:8.4f} {sums['other_s']:8.4f} {sums['gflop']:8.1f} {sums['gb_moved']:7.2f} "
          f"{sums['floor_s']:8.4f} {sums['total_s'] - sums['floor_s']:8.4f}")
    print("seconds per clip; alone: the layer's convolutions timed alone through the same plans; floor: per "
          "convolution and norm pass, the larger of FLOPs at the matmul rate and bytes at the copy bandwidth")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_clip_arguments(parser)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--tiny", action="store_true", help="CPU, width 8, 9x16x24: checks the script, not speed")
    args = parser.parse_args(argv)
    if args.tiny:
        tiny_clip(args)
        args.reps = 1
    with tempfile.TemporaryDirectory() as workdir:
        args.workdir = workdir
        result = measure(args)
    print_table(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
