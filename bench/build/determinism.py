"""Same bytes in every process, rank count and resume: builds of one small RGB dataset with the Wan2.1 VAE
(random weights) in bf16 with the fast path's default settings, each a fresh `latentforge build` process,
compared by their SHA256SUMS.

Runs:
  fresh-1, fresh-2   two uninterrupted builds (--tiny: fresh-1 only)
  ranks-2            two ranks: two GPUs when the machine has them, else two processes on one GPU
  killed+resumed     SIGKILL of the whole build at its second staged unit, then the same command again
  own-plans          (GPU) a build with its own, empty folder of plan books: it times the plans again, as a
                     machine that shares no books would (informational: it may choose other plans, so other bytes)
  autotune-1, -2     (--autotune) tokenizer.cudnn_benchmark=true, the timing race the default avoids
All runs but own-plans share one folder of plan books, fresh for this bench (as builds on one machine share
~/.cache/latentforge/conv-plans): the first build times the convolution plans it meets, the others replay them.
Then `latentforge verify --deep` of fresh-1 on the same device: the comparison it chose and its verdict.
--tiny checks the script on the CPU, so only what must be a process of its own is one: the two ranks of ranks-2 and
the killed build; the other builds and the verify run the CLI's main() in this process.

    python bench/build/determinism.py --out results.json          # on a GPU
    python bench/build/determinism.py --tiny                      # CPU, tiny clips: checks the script
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import torch

SRC = Path(__file__).resolve().parents[2] / "src"
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_common"))
from _random_wan import random_wan_vae  # noqa: E402


def make_dataset(folder: Path, clips: int, frames: int, width: int, height: int) -> Path:
    """A Cosmos-layout folder (videos/*.mp4, metas/*.txt) of moving shapes with grain, H.264 at 24 fps."""
    from latentforge.demo.world import _things, render

    (folder / "videos").mkdir(parents=True, exist_ok=True)
    (folder / "metas").mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    for index in range(clips):
        things = _things(rng, width, height)
        grain = rng.integers(-12, 13, (frames, height, width, 3))
        images = [np.clip(render(things, t, width, height)[0].astype(int) + grain[t], 0, 255).astype(np.uint8)
                  for t in range(frames)]
        with av.open(str(folder / "videos" / f"clip_{index:03d}.mp4"), "w") as container:
            stream = container.add_stream("libx264", rate=Fraction(24))
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.options = {"crf": "18", "preset": "veryfast", "threads": "1", "x264-params": "mbtree=0"}
            for image in images:
                container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
            container.mux(stream.encode())
        (folder / "metas" / f"clip_{index:03d}.txt").write_text(f"clip {index}", encoding="utf-8")
    return folder


def make_checkpoint(folder: Path, base_dim: int) -> Path:
    """A diffusers folder of the Wan2.1 VAE architecture with random weights at width `base_dim` (96: Wan2.1's)."""
    random_wan_vae(base_dim=base_dim).save_pretrained(folder)
    return folder


def build_command(args, dataset: Path, checkpoint: Path, root: Path, *extra: str) -> list[str]:
    return ["build", "--dataset", str(dataset), "--out", str(root),
            "--tokenizer", "wan2.1", "--tokenizer-checkpoint", str(checkpoint), "--precision", "bf16",
            "--text", "none", "--device", args.device, "--workers-per-gpu", str(args.workers_per_gpu), "--quiet",
            "--set", f"frames.num_frames={args.frames}", "--set", f"frames.height={args.height}",
            "--set", f"frames.width={args.width}", "--set", "output.unit_size=2", "--set", "output.rows_per_shard=4",
            "--set", "output.min_free_bytes=0", *[flag for pair in args.set for flag in ("--set", pair)],
            *_slow_cpu_bf16(args.device), *extra]


def _slow_cpu_bf16(device: str) -> list[str]:
    """On the CPU (--tiny: a VAE of width 8) the bf16 run is what is measured, so the pre-flight's refusal of bf16
    on a CPU without bf16 instructions is waived."""
    return ["--set", "tokenizer.allow_slow_cpu_bf16=true"] if device.startswith("cpu") else []


def _env() -> dict[str, str]:
    """This environment with the repository's src first on the path (and whatever else the path holds)."""
    return {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def run_cli(args: list[str], fault: str | None = None, in_process: bool = False) -> tuple[int, float, str, str]:
    """`latentforge ARGS` as its own process, or with `in_process` through the CLI's main() here:
    (exit code, seconds, stdout, the tail of stderr). What an in-process run prints goes to this process's own
    output, so it returns none."""
    started = time.perf_counter()
    if in_process:
        from latentforge.cli.main import main as cli_main

        code = cli_main(args)
        return code, time.perf_counter() - started, "", ""
    env = _env()
    if fault:
        env["LATENTFORGE_FAULT"] = fault
    done = subprocess.run([sys.executable, "-m", "latentforge.cli.main", *args], env=env, capture_output=True,
                          text=True)
    return done.returncode, time.perf_counter() - started, done.stdout, done.stderr[-2000:]


def sums(root: Path) -> str | None:
    path = root / "SHA256SUMS"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def rank_flags(args) -> tuple[list[str], str]:
    if args.device.startswith("cuda") and torch.cuda.device_count() >= 2:
        return ["--gpus", "0,1"], "2 GPUs"
    return ["--procs", "2"], f"2 processes on one {args.device.split(':')[0].upper()}"


def run(args, work: Path) -> dict:
    dataset = make_dataset(work / "data", args.clips, args.source_frames, args.source_width, args.source_height)
    checkpoint = make_checkpoint(work / "vae", args.base_dim)
    ranks, ranks_note = rank_flags(args)
    # every build shares one fresh folder of plan books, as builds on one machine share ~/.cache's
    shared = ["--set", f"tokenizer.conv_plans_dir={work / 'conv-plans'}"]
    ranks = [*ranks, *shared]
    own = ["--set", f"tokenizer.conv_plans_dir={work / 'conv-plans-own'}"]
    plan = [("fresh-1", shared, None), ("ranks-2", ranks, None)]
    if not args.tiny:  # a second build that replays the book fresh-1 recorded (the other runs replay it too)
        plan.insert(1, ("fresh-2", shared, None))
    if args.device.startswith("cuda"):  # the CPU runs no plans
        plan.append(("own-plans", own, None))
    if args.autotune:
        autotune = ["--set", "tokenizer.cudnn_benchmark=true", "--set", "tokenizer.conv_kernels=heuristics"]
        plan += [("autotune-1", autotune, None), ("autotune-2", autotune, None)]
    rows = []
    for name, extra, fault in plan:
        command = build_command(args, dataset, checkpoint, work / name, *extra)
        code, seconds, _, stderr = run_cli(command, fault, in_process=args.tiny and fault is None)
        rows.append({"run": name, "exit": code, "seconds": seconds, "sums": sums(work / name),
                     "note": ranks_note if name == "ranks-2" else "", "stderr": stderr if code else ""})
        print(f"  {name}: exit {code} in {seconds:.1f} s", flush=True)
    killed = build_command(args, dataset, checkpoint, work / "killed", *shared)
    code_kill, seconds_kill, _, _ = run_cli(killed, "stage:2")
    code, seconds, _, stderr = run_cli(killed, in_process=args.tiny)
    rows.append({"run": "killed+resumed", "exit": code, "seconds": seconds_kill + seconds,
                 "sums": sums(work / "killed"),
                 "note": f"SIGKILL at the second staged unit (exit {code_kill}), then the same command",
                 "stderr": stderr if code else ""})
    print(f"  killed+resumed: exit {code_kill} then {code}", flush=True)
    reference = rows[0]["sums"]
    for row in rows:
        row["equals_fresh_1"] = row["sums"] is not None and row["sums"] == reference
    report = work / "verify.json"
    # random weights decode to noise: the quality thresholds are opened, the re-encode comparison is the point
    anything = ["--fail-psnr", "-1000", "--warn-psnr", "-1000", "--fail-ssim", "-1", "--warn-ssim", "-1"]
    verify_code, _, verify_out, verify_err = run_cli(
        ["verify", str(work / "fresh-1"), "--deep", "--device", args.device, "--spot", str(args.spot), "--report",
         str(report), *anything], in_process=args.tiny)
    deep = json.loads(report.read_text()) if report.is_file() else {}
    config = json.loads((work / "fresh-1" / "cache_config.json").read_text()) if reference else {}
    autotuned = [row["sums"] for row in rows if row["run"].startswith("autotune")]
    return {
        "shape": f"{args.frames}x{args.height}x{args.width}", "clips": args.clips, "device": args.device,
        "settings": args.set, "conv_plans": {k: len(v) for k, v in config.get("conv_plans", {}).items()},
        "autotune_runs_agree": len(autotuned) == 2 and autotuned[0] == autotuned[1],
        "environment": [group["environment"] for group in config.get("encoded_by", [])],
        "runs": [{k: v for k, v in row.items() if k != "sums"} for row in rows],
        "deep_verify": {"exit": verify_code, "ok": deep.get("ok"), "comparison": deep.get("comparison"),
                        "reencode": [c["detail"] for c in deep.get("deep", []) if c["name"] == "reencode"],
                        "output": "" if verify_code == 0 else (verify_out + verify_err)[-3000:]},
    }


def print_table(result: dict) -> None:
    print(f"\n{result['clips']} clips at {result['shape']} on {result['device']}, settings {result['settings']}; "
          f"environment {result['environment']}; recorded conv plans per environment {result['conv_plans']}")
    print(f"{'run':<16} {'exit':>4} {'seconds':>8}  same SHA256SUMS as fresh-1   note")
    for row in result["runs"]:
        same = str(row["equals_fresh_1"])
        print(f"{row['run']:<16} {row['exit']:>4} {row['seconds']:8.1f}  {same:<27} {row['note']}")
    if "autotune-1" in [row["run"] for row in result["runs"]]:
        print(f"the two autotuned builds agree with each other: {result['autotune_runs_agree']}")
    deep = result["deep_verify"]
    print(f"verify --deep of fresh-1: exit {deep['exit']}, ok {deep['ok']}; comparison: {deep['comparison']}")
    if deep["output"]:
        print(deep["output"])
    for detail in deep["reencode"]:
        print(f"  reencode: {detail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--clips", type=int, default=8)
    parser.add_argument("--base-dim", type=int, default=96, help="the VAE's width (96: Wan2.1's; tiny: 8)")
    parser.add_argument("--workers-per-gpu", type=int, default=1, help="decode workers per rank (tiny: 0, inline)")
    parser.add_argument("--frames", type=int, default=33)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--width", type=int, default=416)
    parser.add_argument("--autotune", action="store_true", help="also two builds with cuDNN autotuning")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config setting for every build, e.g. tokenizer.conv_kernels=heuristics")
    parser.add_argument("--workdir", type=Path, help="keep the builds here (default: a temporary folder)")
    parser.add_argument("--out", type=Path, help="write the result as JSON")
    parser.add_argument("--spot", type=int, default=4, help="samples `verify --deep` re-encodes and decodes")
    parser.add_argument("--tiny", action="store_true",
                        help="CPU, width 8, 4 clips of 9x32x48, no decode workers, --spot 2: checks the script")
    args = parser.parse_args(argv)
    if args.tiny:  # 4 clips: two units, so two ranks each stage one and the kill at the second unit is mid-build
        args.device, args.clips, args.frames, args.height, args.width, args.spot = "cpu", 4, 9, 32, 48, 2
        args.base_dim, args.workers_per_gpu = 8, 0  # decoding inline: a decode worker costs a process start
    args.source_frames, args.source_width, args.source_height = args.frames + 7, args.width + 64, args.height + 32
    with tempfile.TemporaryDirectory() as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        result = run(args, work)
    print_table(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    same = all(row["equals_fresh_1"] for row in result["runs"] if row["run"].split("-")[0] not in ("autotune", "own"))
    return 0 if same and result["deep_verify"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
