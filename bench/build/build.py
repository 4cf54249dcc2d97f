"""End-to-end `latentforge build` throughput, CPU cost and multi-GPU scaling (issues 10 and 11), in one command.

Phases (--phases; `throughput` and `scaling` are groups, `all` is both, sharing one generated dataset; `i2v` runs
only when named, and not with --tiny, whose haar tokenizer has no image-to-video conditioning):
  cpu         core-seconds of decode + resize (+ normalise) of one 1280x720 clip to the output, alone
  pure        pure-encode samples/s: the builds' tokenizer, batch and precision on batches already on the GPU
  t5          T5 seconds over the dataset's prompts: Cosmos' padded call vs ours (each prompt alone), and in the build
  perception  `latentforge build` of the perception preset (rgb+mask+depth) on 1 GPU, steady state
  rgb         the same build with RGB only
  rgb_device  the RGB build with frames.resize_backend=device (and frames.decoder=nvdec on a GPU): the workers only
              decode and copy YUV planes; colour conversion and resize run on the encoder's device
  long        the RGB build over long videos of shots (--long-*): shot detection (segments.detect=content) and
              windows every --long-stride frames inside each shot; its samples/s against the pure RGB encode
  i2v         the RGB build with image-to-video conditioning (y of Wan I2V and CLIP ViT-H/14 tokens with random
              weights, conditioning.precision from --i2v-precision), and its own pure encode (clip + y + tokens)
  scaling     the perception build on each N of --gpus-list (N=1 is the perception run), efficiency
  sha         SHA-256 of every shard of the first two units, committed from each scaling run's staged units

Steady state: each build runs on more rows than its time allows and is stopped with SIGTERM after
--warmup + --duration seconds (it stops cleanly and would resume); samples/s is the least-squares slope of
staged samples against the staging time of each unit after the warm-up (bench/build/_build_run.py). The SHA check
copies units 0 and 1 staged by each run, with that run's record of its models, into a fresh root and runs
`latentforge build --limit <2 units>` there (--tiny: through the CLI's main() in this process), which resumes from
them and commits: the shards then hold exactly what that run's ranks encoded. (A run that ran to its end committed
and retired its units: their records are copied with its shards, from which the commit reads their rows back.)

    python bench/build/build.py --phases all --gpus-list 1 2 --out results/   # GPU machine
    python bench/build/build.py --tiny --out /tmp/bench                         # CPU, seconds (a test)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_common"))

import _build_data as data  # noqa: E402
import _build_probes as probes  # noqa: E402
import _build_report as report  # noqa: E402
import _build_run as runner  # noqa: E402
import _build_subset_commit as subset  # noqa: E402
from _build_args import parse_args, size_pair  # noqa: E402


def device_resize_frames(args) -> dict[str, str]:
    """The frames settings of the rgb_device build: --device-resize-decoder where there is a GPU, else the CPU's."""
    return {"resize_backend": "device",
            "decoder": args.device_resize_decoder if args.device.startswith("cuda") else "cpu"}


def build_config(args, table: Path, vae: Path | None, text: Path, root: Path, gpus: int, rgb_only: bool,
                 limit: int | None, frames: dict[str, Any] | None = None,
                 conditioning: dict[str, Any] | None = None) -> dict[str, Any]:
    height, width = size_pair(args.size)
    cuda = args.device.startswith("cuda")
    dataset = {"reader": "table", "path": [str(table)], "id_column": "id", **({"limit": limit} if limit else {})}
    if not rgb_only:
        dataset.update(mask_column="mask", depth_column="depth")
    tokenizer = ({"name": "wan2.1", "checkpoint": str(vae), "precision": "bf16"} if vae is not None
                 else {"name": "haar-4x8x8", "precision": "fp32"})
    run = {"gpus": ",".join(str(i) for i in range(gpus))} if cuda else {"device": "cpu", "procs": gpus}
    return {
        "preset": "openvid-perception-stage1",
        **({"conditioning": conditioning} if conditioning else {}),
        "dataset": dataset,
        "frames": {"num_frames": args.frames, "height": height, "width": width, **(frames or {})},
        "modalities": {"names": ["rgb"] if rgb_only else ["rgb", "mask", "depth"], "mask": {"ids": data.MASK_IDS}},
        "tokenizer": tokenizer,
        "text": {"name": "t5", "path": str(text), "precision": "bf16" if cuda else "fp32"},
        "output": {"root": str(root), "unit_size": args.unit_size, "batch_size": args.batch},
        "run": {**run, "workers_per_gpu": args.workers_per_gpu},
    }


class Bench:
    """Holds the shared inputs and the results; every phase records its own error instead of raising."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.results: dict[str, Any] = {"machine": machine(args), "args": {k: str(v) for k, v in vars(args).items()},
                                        "phases": {}, "errors": {}}
        self.runs: dict[str, runner.BuildRun] = {}
        self.table: Path | None = None
        self.vae: Path | None = None
        self.text: Path | None = None
        self.clip: Path | None = None

    def phase(self, name: str, fn: Callable[[], Any]) -> None:
        started = time.time()
        print(f"== {name} ...", flush=True)
        try:
            self.results["phases"][name] = fn()
        except Exception as error:  # noqa: BLE001 - one failed phase must not cost the rest of a GPU run
            traceback.print_exc()
            self.results["errors"][name] = f"{type(error).__name__}: {error}"
        print(f"== {name}: {time.time() - started:.1f} s", flush=True)
        self.save()

    def save(self) -> None:
        self.args.out.mkdir(parents=True, exist_ok=True)
        (self.args.out / "build-bench.json").write_text(json.dumps(self.results, indent=2, default=str) + "\n")

    def rows_for(self, gpus: int, duration: float, rgb_only: bool) -> int:
        """Each build's --limit: more rows than it can stage before its deadline, in whole units. The rate
        guess is 1.25 x the measured pure-encode rate when known, else --max-rate (x3 for RGB only)."""
        a = self.args
        pure = self.results["phases"].get("pure")
        if pure:
            rate = 1.25 * pure["samples_per_s_rgb" if rgb_only else "samples_per_s_all_modalities"]
        else:
            rate = a.max_rate * (3 if rgb_only else 1)
        wanted = gpus * rate * (a.warmup + duration) + 2 * a.unit_size
        return int(math.ceil(wanted / a.unit_size) * a.unit_size)

    def prepare(self) -> dict[str, Any]:
        a = self.args
        width, height = size_pair(a.src_size)
        longest = max([a.duration] + [a.scale_duration for n in a.gpus_list if n > 1])
        rows = a.rows or max(self.rows_for(max(a.gpus_list), longest, False), self.rows_for(1, a.duration, True))
        spec = data.DatasetSpec(a.clips, rows, width, height, a.src_frames, caption_dup=a.caption_dup)
        started = time.time()
        self.table = data.make_dataset(a.workdir / "dataset", spec, a.gen_procs)
        generated = time.time() - started
        started = time.time()
        if not a.tiny:
            self.vae = data.make_wan21_vae(a.workdir / "models" / "wan21-random")
        if "i2v" in a.phase_list:
            from encode_i2v import RELEASED_CLIP, make_clip_folder

            self.clip = make_clip_folder(a.workdir / "models" / "clip", RELEASED_CLIP)
        corpus = sorted(set(data.table_captions(self.table)))
        self.text = data.make_text_model(a.workdir / "models" / a.text, corpus, a.device, a.text == "t5-11b")
        return {"rows": rows, "clips": a.clips, "dataset_s": generated, "models_s": time.time() - started}

    def config_file(self, name: str, gpus: int, rgb_only: bool, limit: int | None, frames: dict[str, Any] | None = None,
                    conditioning: dict[str, Any] | None = None, table: Path | None = None,
                    segments: dict[str, Any] | None = None) -> tuple[Path, Path]:
        root = self.args.workdir / "caches" / name
        config = build_config(self.args, table or self.table, self.vae, self.text, root, gpus, rgb_only, limit,
                              frames, conditioning)
        if segments:
            config["segments"] = segments
        path = self.args.workdir / "configs" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path, root

    def loaded_config(self, rgb_only: bool = False, conditioning: dict[str, Any] | None = None):
        from latentforge.config.loading import load_config

        path, _ = self.config_file("probe-config", 1, rgb_only, self.args.batch, conditioning=conditioning)
        return load_config(path)

    def conditioning(self) -> dict[str, Any]:
        return {"image_latent": "wan-i2v", "image_embeds": "clip-vit-h14", "image_encoder_path": str(self.clip),
                "precision": self.args.i2v_precision}

    def i2v(self) -> dict[str, Any]:
        """Its pure encode (clip + y + image tokens on batches already on the device), then its steady build."""
        pure = probes.pure_encode_i2v(self.loaded_config(True, self.conditioning()), self.args.device,
                                      self.args.pure_batches)
        build = self.steady_build("i2v", 1, True, self.args.duration, conditioning=self.conditioning())
        return {**build, "pure": pure}

    def long(self) -> dict[str, Any]:
        """The RGB build over long videos: shots detected, windows inside them, steady samples/s."""
        a = self.args
        width, height = size_pair(a.src_size)
        started = time.time()
        table = data.make_long_dataset(a.workdir / "long", a.long_videos, width, height, a.long_seconds,
                                       a.long_shot_seconds, data.table_captions(self.table), a.gen_procs)
        generated = time.time() - started
        # every window of every video (no dataset.limit); units are counted as full (the build makes the plan)
        build = self.steady_build("long", 1, True, a.duration, {"windows": f"every {a.long_stride}"},
                                  table=table, segments={"detect": "content"}, planned=10**9)
        return {**build, "videos": a.long_videos, "video_s": a.long_seconds, "shot_s": a.long_shot_seconds,
                "dataset_s": generated}

    def steady_build(self, name: str, gpus: int, rgb_only: bool, duration: float,
                     frames: dict[str, Any] | None = None,
                     conditioning: dict[str, Any] | None = None, table: Path | None = None,
                     limit: int | None = None, segments: dict[str, Any] | None = None,
                     planned: int | None = None) -> dict[str, Any]:
        a = self.args
        if limit is None and planned is None:
            limit = min(self.rows_for(gpus, duration, rgb_only), self.results["phases"]["prepare"]["rows"])
        path, root = self.config_file(name, gpus, rgb_only, limit, frames, conditioning, table, segments)
        (a.out / "logs").mkdir(parents=True, exist_ok=True)
        run = runner.run_build(name, path, root, gpus, a.unit_size, planned or limit, a.warmup + duration, a.tick,
                               a.out / "logs" / f"{name}.log")
        self.runs[name] = run
        (a.out / "logs" / f"{name}.run.json").write_text(json.dumps(run.to_json(), default=str))
        if run.exit_code not in (0, 143) and not run.events:
            raise RuntimeError(f"build {name} exited {run.exit_code}:\n{run.output_tail}")
        steady = runner.steady_state(run, a.warmup)
        return {"gpus": gpus, "limit": limit, "exit_code": run.exit_code, "stopped_by_bench": run.stopped_by_bench,
                "units_staged": len(run.events), "wall_s": run.ended_unix - run.started_unix,
                "dataset_exhausted": (run.exit_code == 0 and not run.stopped_by_bench if planned
                                      else len(run.events) * a.unit_size >= limit),
                "steady": steady, "ranks": runner.rank_clocks(run),
                "probe_s": (run.stats or {}).get("stage_seconds", {}).get("probe")}

    def scaling(self) -> dict[str, Any]:
        results = {}
        for n in self.args.gpus_list:
            if n == 1 and "perception" in self.results["phases"]:
                results[1] = self.results["phases"]["perception"]
                continue
            name = "perception" if n == 1 else f"perception-{n}gpu"
            results[n] = self.steady_build(name, n, False, self.args.duration if n == 1 else self.args.scale_duration)
        base = results.get(1, {}).get("steady", {}).get("samples_per_s")
        for n, result in results.items():
            rate = result["steady"].get("samples_per_s")
            result["efficiency"] = rate / (n * base) if base and rate else None
        return results


def machine(args) -> dict[str, Any]:
    import torch

    info = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__, "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if args.device.startswith("cuda") and torch.cuda.is_available():
        info.update(gpu=torch.cuda.get_device_name(0), gpus=torch.cuda.device_count())
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                        cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        info["commit"] = None
    return info


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0])
    bench = Bench(args)
    bench.results["command"] = " ".join([sys.executable, *sys.argv]) if argv is None else f"build.py {' '.join(argv)}"
    bench.phase("prepare", bench.prepare)
    if "prepare" in bench.results["errors"]:
        report.print_tables(bench.results)
        return 1
    phases: dict[str, Callable[[], Any]] = {
        "cpu": lambda: probes.cpu_decode_cost(bench.loaded_config(), args.cpu_reps, args.device),
        "pure": lambda: probes.pure_encode(bench.loaded_config(), args.device, args.pure_batches),
        "t5": lambda: probes.text_cost(bench.loaded_config(), args.device,
                                       data.table_captions(bench.table)[: 16 * args.unit_size], args.unit_size),
        "perception": lambda: bench.steady_build("perception", 1, False, args.duration),
        "rgb": lambda: bench.steady_build("rgb", 1, True, args.duration),
        "rgb_device": lambda: bench.steady_build("rgb_device", 1, True, args.duration, device_resize_frames(args)),
        "long": bench.long,
        "i2v": bench.i2v,
        "scaling": bench.scaling,
        "sha": lambda: subset.sha(bench),
    }
    for name in args.phase_list:
        bench.phase(name, phases[name])
    report.print_tables(bench.results)
    return 1 if bench.results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
