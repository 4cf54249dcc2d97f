"""`latentforge build`: thin wrapper over latentforge.build.build."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

# flag -> config key; every flag is also reachable as --set section.key=value
FLAG_KEYS = {
    "dataset": "dataset.path",
    "reader": "dataset.reader",
    "out": "output.root",
    "tokenizer": "tokenizer.name",
    "tokenizer_checkpoint": "tokenizer.checkpoint",
    "tokenizer_sha256": "tokenizer.sha256",
    "precision": "tokenizer.precision",
    "text": "text.name",
    "text_path": "text.path",
    "text_source": "text.source",
    "empty_prompt": "text.empty_prompt",
    "device": "run.device",
    "limit": "dataset.limit",
    "procs": "run.procs",
    "gpus": "run.gpus",
    "workers_per_gpu": "run.workers_per_gpu",
    "max_reject_fraction": "run.max_reject_fraction",
    "on_missing_caption": "dataset.on_missing_caption",
    "executor": "run.executor",
    "ray_address": "run.ray_address",
}


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by build and scan: everything that says what the cache is made of."""
    parser.add_argument("--config", help="YAML config file")
    parser.add_argument("--preset", help="openvid-perception-stage1 | cosmos-predict2-720p | cosmos-predict2-480p | wan2.1-t2v-480p")
    parser.add_argument("--dataset", nargs="+", help="dataset folder, or table file(s)/globs")
    parser.add_argument("--reader", help="cosmos_dir | table")
    parser.add_argument("--out", help="cache root")
    parser.add_argument("--tokenizer", help="haar-4x8x8 | wan2.1")
    parser.add_argument("--tokenizer-checkpoint", help="Wan2.1_VAE.pth, Cosmos tokenizer.pth or a diffusers folder")
    parser.add_argument("--tokenizer-sha256", help="refuse a checkpoint with another SHA-256")
    parser.add_argument("--precision", help="fp32 | bf16 | cosmos-bf16")
    parser.add_argument("--text", help="t5 | umt5 | none")
    parser.add_argument("--text-path", help="local text-encoder folder")
    parser.add_argument("--text-source", help="encoder | pickles | pickles+encoder: rows from the encoder, from "
                        "Cosmos t5_xxl/<stem>.pickle files, or pickles where present (docs/text.md)")
    parser.add_argument("--no-empty-prompt", dest="empty_prompt", action="store_const", const=False,
                        help="write no empty_prompt.h5 (lets a pickles-only build run without a T5 folder)")
    parser.add_argument("--device", help="cpu | cuda | cuda:N")
    parser.add_argument("--limit", type=int, help="keep the first N samples of the plan")
    parser.add_argument("--on-missing-caption", help="reject | empty")
    parser.add_argument("--max-reject-fraction", type=float, help="abort when the probe rejects more than this")
    parser.add_argument("--procs", type=int, help="encoder processes on --device (default 1)")
    parser.add_argument("--gpus", help="all | 0,1,...: one encoder process per GPU")
    parser.add_argument("--workers-per-gpu", type=int, help="CPU decode workers per encoder process (0: inline)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any config key")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("build", help="build a latent cache (resumes when rerun)")
    add_input_arguments(parser)
    parser.add_argument("--no-encode", action="store_true", help="only probe the input (same as `scan`)")
    parser.add_argument("--overwrite", action="store_true", help="start over instead of resuming")
    parser.add_argument("--executor", help="local | ray: where units run (docs/execution.md)")
    parser.add_argument("--ray-address", help="with --executor ray: auto | HOST:PORT of the Ray cluster")
    parser.add_argument("--quiet", action="store_true")
    parser.set_defaults(run=run)
    from . import scan

    scan.add_parser(subparsers)


def config_from_args(args: argparse.Namespace):
    from ..config import load_config

    extra: dict = {}
    for flag, key in FLAG_KEYS.items():
        value = getattr(args, flag, None)
        if value is not None:
            section, name = key.split(".")
            extra.setdefault(section, {})[name] = value
    return load_config(args.config, list(args.set), preset=args.preset, extra=extra)


def resume_command() -> str:
    return shlex.join(["latentforge", *[a for a in sys.argv[1:] if a != "--overwrite"]])


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ..build import build
    from ..errors import LatentforgeError
    from ..executor.process_setup import StopRequested

    if args.no_encode:
        from .scan import run as run_scan

        return run_scan(args)
    config = config_from_args(args)
    try:
        result = build(config, overwrite=args.overwrite, quiet=args.quiet)
    except LatentforgeError as error:
        if isinstance(error.__cause__, RuntimeError):
            # A failed HDF5 write leaves the library holding a broken file that crashes it at exit
            # (SIGSEGV in its atexit hook); report and leave without running it.
            Console(stderr=True).print(f"error: {error}", soft_wrap=True, markup=False)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        raise
    except StopRequested as stop:
        Console(stderr=True).print(f"{stop}; staged work is kept. Resume with:\n  "
                                   f"{resume_command()}", soft_wrap=True, markup=False)
        return stop.exit_code
    rejects = sum(result.rejects_by_reason.values())
    Console().print(
        f"[green]built[/green] {result.root}: {result.num_samples} samples, {rejects} rejected "
        f"{dict(result.rejects_by_reason) or ''} in {result.seconds:.1f} s; verified"
    )
    return 0
