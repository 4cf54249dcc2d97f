"""A build with each window's audio against the same build without: steady samples/s of the RGB Wan2.1 build over
clips with an AAC stereo track, once video only, once with `audio` (PCM cut by presentation time and resampled) and
the ltx2-audio tokenizer (LTX-2's audio VAE architecture with random weights) encoding it beside the video latent.

Both builds run on the same rendered clips, each stopped after --warmup + --duration seconds; samples/s is the slope
of staged samples over the units staged after the warm-up (bench/build/_build_run.py), as in bench/build/build.py.

    python bench/build/audio.py --out audio.json                 # GPU machine
    python bench/build/audio.py --tiny --out audio.json          # CPU, seconds (a test)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _build_data as data  # noqa: E402
import _build_run as runner  # noqa: E402
from _build_args import size_pair, tiny_defaults  # noqa: E402
from _rgb_build import rgb_build_config, write_config  # noqa: E402

TINY = dict(clips=2, rows=8, src_size="96x64", src_frames=12, frames=9, size="48x64", unit_size=2, warmup=0.0,
            duration=120.0, text="tiny", tiny_vae=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="CPU: haar tokenizer, a small audio VAE, 8 rows")
    p.add_argument("--out", type=Path, default=Path("audio-bench.json"), help="the results as JSON")
    p.add_argument("--work", type=Path, default=None, help="data, models, caches and logs (default: beside --out)")
    p.add_argument("--clips", type=int, default=8)
    p.add_argument("--rows", type=int, default=400, help="rows of each build (more than its time allows)")
    p.add_argument("--src-size", default="1280x720", help="source WxH")
    p.add_argument("--src-frames", type=int, default=96)
    p.add_argument("--frames", type=int, default=93)
    p.add_argument("--size", default="480x832", help="output HxW")
    p.add_argument("--unit-size", type=int, default=8)
    p.add_argument("--warmup", type=float, default=90.0,
                   help="seconds of each build not measured (its start: models, plans, probe)")
    p.add_argument("--duration", type=float, default=90.0)
    p.add_argument("--text", choices=("t5-11b", "tiny"), default="t5-11b")
    p.add_argument("--tiny-vae", action="store_true", help="the audio VAE shrunk (the architecture's own layers)")
    args = p.parse_args(argv)
    if args.tiny:
        tiny_defaults(args, argv, TINY)
    import torch

    args.device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if args.device == "cpu":
        args.text = "tiny"
    args.work = args.work or args.out.parent / f"{args.out.stem}-work"
    return args


def make_audio_vae(folder: Path, tiny: bool) -> Path:
    """LTX-2's audio VAE (diffusers' AutoencoderKLLTX2Audio at its defaults, stereo 16 kHz) with seeded random
    weights, saved as a diffusers folder; --tiny shrinks its widths."""
    import torch
    from diffusers import AutoencoderKLLTX2Audio

    torch.manual_seed(0)
    shrunk = dict(base_channels=16, ch_mult=(1, 2, 4), num_res_blocks=1, latent_channels=4, mel_bins=16) if tiny else {}
    AutoencoderKLLTX2Audio(**shrunk).eval().save_pretrained(folder)
    return folder


def steady_build(name: str, config: dict[str, Any], args) -> dict[str, Any]:
    path = write_config(args.work, name, config)
    root = Path(config["output"]["root"])
    run = runner.run_build(name, path, root, 1, args.unit_size, args.rows, args.warmup + args.duration, 1.0,
                           args.work / "logs" / f"{name}.log")
    if run.exit_code not in (0, 143) and not run.events:
        raise RuntimeError(f"build {name} exited {run.exit_code}:\n{run.output_tail}")
    stats = run.stats or {}
    peak = max((stats.get("metrics", {}).get("gpu_memory_bytes") or {"": 0}).values())
    return {"exit_code": run.exit_code, "units_staged": len(run.events),
            "steady": runner.steady_state(run, args.warmup),
            # seconds by stage (preflight and probe included): where a build that staged nothing spent its time
            "stage_seconds": stats.get("stage_seconds"),
            "stage_seconds_per_sample": stats.get("stage_seconds_per_sample"), "peak_gpu_gib": peak / 2**30,
            "rejects": stats.get("rejects_by_reason")}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.work
    started = time.time()
    width, height = size_pair(args.src_size)
    spec = data.DatasetSpec(args.clips, args.rows, width, height, args.src_frames, audio=True)
    table = data.make_dataset(work / "dataset", spec, 1 if args.tiny else min(args.clips, os.cpu_count() or 1))
    vae = None if args.tiny else data.make_wan21_vae(work / "models" / "wan21-random")
    text = data.make_text_model(work / "models" / args.text, sorted(set(data.table_captions(table))), args.device,
                                args.text == "t5-11b")
    audio_vae = make_audio_vae(work / "models" / "ltx2-audio", args.tiny_vae)
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "prepare_s": time.time() - started}
    # windows last num_frames / the clips' own 30 fps
    audio = {"enabled": True, "sample_rate": 16000, "channels": 2, "max_seconds": args.frames / spec.fps + 0.05,
             "tokenizer": "ltx2-audio",
             "checkpoint": str(audio_vae), "precision": "bf16" if args.device == "cuda" else "fp32"}
    results["builds"] = {}
    for name, section in (("video", None), ("video+audio", audio)):
        config = rgb_build_config(args.size, args.frames, args.device, table, vae, text, work / "caches" / name,
                                  args.unit_size, {"audio": section} if section else {})
        results["builds"][name] = steady_build(name, config, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=str))
    print_table(results)
    return 0


def print_table(results: dict[str, Any]) -> None:
    video = results["builds"]["video"]["steady"].get("samples_per_s")
    print(f"\n{'build':<12} {'samples/s':>9} {'vs video':>8} {'units':>5} {'GPU GiB':>7}  note")
    for name, row in results["builds"].items():
        rate = row["steady"].get("samples_per_s")
        ratio = f"{rate / video:.3f}" if rate and video else "-"
        print(f"{name:<12} {rate or 0:9.3f} {ratio:>8} {row['units_staged']:>5} {row['peak_gpu_gib']:7.1f}  "
              f"{row['steady'].get('error', '')}")


if __name__ == "__main__":
    sys.exit(main())
