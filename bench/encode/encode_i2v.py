"""Image-to-video conditioning: what it adds to each clip's encode, side by side in one run.

Times, on the same random-weight Wan2.1 VAE and the same clips, the clip's own encode (the build's bf16 fast path),
the conditioning latent y (the VAE encode of [frame 0, zeros] plus the frame mask) in fp32 and in bf16, and the
CLIP ViT-H/14 image tokens of frame 0 in fp32 and bf16 (random weights at the released size, loaded from a
diffusers-style image_encoder/ + image_processor/ folder through the build's own loader). Prints a table of
s/clip, peak GiB and y's rel-L2 of bf16 against fp32; `--out` writes it as JSON. `--tiny` runs every path on the
CPU in seconds (VAE width 8, a 2-layer CLIP at 28x28, 5 frames of 16x32).

    python bench/encode/encode_i2v.py --device cuda --out encode-i2v.json
    python bench/encode/encode_i2v.py --tiny
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_common"))

from _encode_probes import timed  # noqa: E402
from _random_wan import random_wan_vae  # noqa: E402
from encode import load_clips  # noqa: E402

from latentforge import registry  # noqa: E402
from latentforge.config.loading import load_config
from latentforge.devices import wait_for_device  # noqa: E402
from latentforge.pipeline.conditioning import ConditioningStage, first_frame_video, frame0_uint8  # noqa: E402
from latentforge.tokenizers.base import pixels_to_input  # noqa: E402

# The released image encoder of Wan2.1 I2V (diffusers' image_encoder/config.json: CLIP ViT-H/14 at 224 x 224)
RELEASED_CLIP = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=16,
                     patch_size=14, image_size=224, hidden_act="gelu", projection_dim=1024)
TINY_CLIP = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, patch_size=14,
                 image_size=28, hidden_act="gelu", projection_dim=16)


def make_clip_folder(folder: Path, spec: dict[str, int | str], seed: int = 0) -> Path:
    """A pipeline-style folder: image_encoder/ (random CLIPVisionModel) and image_processor/ (CLIPImageProcessor
    at the model's image size)."""
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

    torch.manual_seed(seed)
    model = CLIPVisionModel(CLIPVisionConfig(**spec)).eval()
    model.save_pretrained(folder / "image_encoder")
    size = int(spec["image_size"])
    CLIPImageProcessor(size={"shortest_edge": size}, crop_size={"height": size, "width": size}).save_pretrained(
        folder / "image_processor")
    return folder


def stage_for(args, vae: Path, clip: Path, precision: str) -> tuple[Any, ConditioningStage]:
    """The build's tokenizer (bf16 fast path on CUDA, fp32 on the CPU) and its conditioning stage at `precision`."""
    clip_precision = "bf16" if args.device.startswith("cuda") else "fp32"
    config = load_config(extra={
        # load_config checks a whole build; nothing is listed or written: this bench only encodes
        "dataset": {"reader": "table", "path": ["unused.csv"]}, "output": {"root": str(vae.parent / "unused")},
        "frames": {"num_frames": args.frames, "height": args.height, "width": args.width},
        "tokenizer": {"name": "wan2.1", "checkpoint": str(vae), "precision": clip_precision},
        "text": {"name": "none"},
        "conditioning": {"image_latent": "wan-i2v", "image_embeds": "clip-vit-h14",
                         "image_encoder_path": str(clip), "precision": precision},
        "run": {"device": args.device},
    })
    tokenizer = registry.resolve("tokenizer", "wan2.1").from_config(config.tokenizer, torch.device(args.device))
    stage = ConditioningStage.load(config, tokenizer)
    assert stage is not None
    return tokenizer, stage


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def measure(args, vae: Path, clip: Path, clips: list[np.ndarray], precision: str) -> tuple[dict, list]:
    """One conditioning precision: (its row, y of every clip on the CPU)."""
    tokenizer, stage = stage_for(args, vae, clip, precision)
    device = torch.device(args.device)
    clip_s, y_s, tokens_s, peaks, ys = [], [], [], [], []
    for frames in clips:
        video = pixels_to_input(frames, args.device).unsqueeze(0)
        for seconds, fn in ((clip_s, lambda: tokenizer.encode(video)),
                            (y_s, lambda: stage.tokenizer.encode(first_frame_video(video))),
                            (tokens_s, lambda: stage.image_encoder.encode(frame0_uint8(video)))):
            took, peak, _ = timed(fn, device, args.reps)
            seconds.append(took)
            peaks.append(peak)
        ys.append(stage.encode(video)[1]["image_cond_latent"].cpu())
    row = {"conditioning precision": precision, "clip encode s (build path)": float(np.median(clip_s)),
           "y encode s": float(np.median(y_s)), "CLIP ms": 1000 * float(np.median(tokens_s)),
           "peak GiB": None if device.type != "cuda" else max(peaks)}
    return row, ys


def host_cpu(args, vae: Path, clip: Path, clips: list[np.ndarray]) -> list[dict[str, Any]]:
    """The host's CPU per sample while it queues an I2V encode the way a build does (batch after batch, one wait
    at the end), part by part: the clip alone, + y, + the image tokens, the last again with torch at one CPU
    thread; and CLIP's image processor alone on host frames. Each row: process CPU s and wall s per batch, torch's
    threads, and the busiest threads' CPU s per batch (which thread burns it: the main one or torch's pool)."""
    import psutil

    tokenizer, stage = stage_for(args, vae, clip, args.host_cpu_precision)
    device = torch.device(args.device)
    video = pixels_to_input(clips[0], args.device).unsqueeze(0)
    frame0 = frame0_uint8(video).cpu()
    y_only = copy.copy(stage)  # the same stage without its image encoder: the clip and y only
    y_only.image_encoder = None
    variants = [("clip alone", lambda: tokenizer.encode(video)),
                ("clip + y", lambda: y_only.encode(video, tokenizer.encode)),
                ("clip + y + tokens", lambda: stage.encode(video, tokenizer.encode)),
                ("image processor alone (host frames)", lambda: stage.image_encoder.preprocess(frame0, device)),
                ("clip + y + tokens, torch threads 1", lambda: stage.encode(video, tokenizer.encode))]
    process, rows, threads = psutil.Process(), [], torch.get_num_threads()
    for name, fn in variants:
        if name.endswith("threads 1"):
            torch.set_num_threads(1)
        with torch.inference_mode():
            fn()
            wait_for_device(device)
            before = {t.id: t.user_time + t.system_time for t in process.threads()}
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(args.host_cpu_batches):
                fn()
            wait_for_device(device)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        after = {t.id: t.user_time + t.system_time for t in process.threads()}
        busiest = sorted(((after[i] - before.get(i, 0.0), i) for i in after), reverse=True)[:4]
        per = args.host_cpu_batches
        rows.append({"part": name, "torch threads": torch.get_num_threads(), "host CPU s/batch": cpu / per,
                     "wall s/batch": wall / per,
                     "busiest threads CPU s/batch": [round(t / per, 4) for t, i in busiest],
                     "main thread is busiest": busiest[0][1] == threading.get_native_id()})
    torch.set_num_threads(threads)
    processor = getattr(stage.image_encoder.preprocess, "processor", None)
    print(f"image processor: {type(processor).__name__}; torch threads {threads}; "
          f"OMP/MKL env: { {k: v for k, v in os.environ.items() if k.startswith(('OMP_', 'MKL_', 'KMP_', 'GOMP'))} }")
    return rows


def run(args) -> dict[str, Any]:
    work = Path(args.workdir or tempfile.mkdtemp(prefix="encode-i2v-"))
    vae = work / "wan21"
    random_wan_vae(seed=0, base_dim=args.base_dim).save_pretrained(vae)
    clip = make_clip_folder(work / "clip", TINY_CLIP if args.tiny else RELEASED_CLIP)
    clips = load_clips(None, args.clips, args.frames, args.height, args.width)
    rows: list[dict[str, Any]] = []
    outputs: dict[str, list[torch.Tensor]] = {}
    for precision in args.precisions:
        row, outputs[precision] = measure(args, vae, clip, clips, precision)
        rows.append(row)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    if "fp32" in outputs and "bf16" in outputs:
        errors = [rel_l2(b[:, 4:], f[:, 4:]) for b, f in zip(outputs["bf16"], outputs["fp32"])]
        for row in rows:
            row["y rel-L2 vs fp32 (max of clips)"] = 0.0 if row["conditioning precision"] == "fp32" else max(errors)
    host = host_cpu(args, vae, clip, clips) if args.host_cpu_batches else None
    for row in rows:
        pure = row["clip encode s (build path)"] + row["y encode s"] + row["CLIP ms"] / 1000
        row["i2v pure s/sample"] = pure
        row["i2v / rgb-only time"] = pure / row["clip encode s (build path)"]
    return {"machine": machine(args), "shape": f"{args.frames}x{args.height}x{args.width}", "rows": rows,
            "host_cpu": host}


def machine(args) -> dict[str, Any]:
    info = {"python": platform.python_version(), "torch": torch.__version__, "device": args.device}
    if args.device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def print_table(results: dict[str, Any]) -> None:
    print_rows(results["rows"], f"shape {results['shape']}, {results['machine']}")
    if results["host_cpu"]:
        print_rows(results["host_cpu"], "host CPU while queueing batches back to back (one wait at the end)")


def print_rows(rows: list[dict[str, Any]], title: str) -> None:
    keys = list(rows[0])
    print(title)
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--frames", type=int, default=81)
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--width", type=int, default=832)
    p.add_argument("--clips", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--base-dim", type=int, default=96, help="the VAE's width (96: Wan2.1's)")
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], help="conditioning.precision values")
    p.add_argument("--workdir", help="where the random checkpoints are saved (a temp dir)")
    p.add_argument("--host-cpu-batches", type=int, default=0,
                   help="also measure the host's CPU per batch while queueing, over this many batches per part")
    p.add_argument("--host-cpu-precision", choices=("fp32", "bf16"), default="bf16",
                   help="conditioning.precision of the host CPU rows")
    p.add_argument("--out", type=Path)
    p.add_argument("--tiny", action="store_true", help="CPU, VAE width 8, a 2-layer CLIP, 5 frames of 16x32")
    args = p.parse_args(argv)
    if args.tiny:
        args.device, args.frames, args.height, args.width, args.base_dim, args.reps, args.clips = (
            "cpu", 5, 16, 32, 8, 1, 1)
        args.precisions = ["fp32"]  # bf16 on a CPU without bf16 instructions is refused by the build, and slow
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args)
    print_table(results)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
