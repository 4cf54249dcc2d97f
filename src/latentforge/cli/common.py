"""What several verbs share: the flags that say what a cache is made of, and console output without markup."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from ..config.presets import PRESETS


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by build and scan: everything that says what the cache is made of."""
    parser.add_argument("--config", help="YAML config file")
    parser.add_argument("--preset", help=" | ".join(sorted(PRESETS)))
    parser.add_argument("--dataset", nargs="+", help="dataset folder, or table file(s)/globs")
    parser.add_argument("--reader", help="auto (default: a folder -> cosmos_dir, table files -> table) | "
                        "cosmos_dir | table")
    parser.add_argument("--out", help="cache root")
    parser.add_argument("--tokenizer", help="haar-4x8x8 | wan2.1 | wan2.2 | cosmos-cv4x8x8 | cosmos-cv8x8x8 | "
                        "cosmos-cv8x16x16 | cosmos-dv4x8x8 | cosmos-dv8x8x8 | cosmos-dv8x16x16")
    parser.add_argument("--tokenizer-checkpoint", help="Wan2.1_VAE.pth, Cosmos-Predict2 tokenizer.pth, a diffusers "
                        "folder, or a Cosmos-Tokenizer hub folder (encoder.jit + decoder.jit) or autoencoder.jit")
    parser.add_argument("--tokenizer-sha256", help="refuse a checkpoint with another SHA-256")
    parser.add_argument("--precision", help="fp32 | bf16 | cosmos-bf16")
    parser.add_argument("--text", help="t5 | umt5 | none")
    parser.add_argument("--text-path", help="local text-encoder folder, or a hub id already in the local Hugging "
                        "Face cache (never downloaded)")
    parser.add_argument("--text-source", help="encoder | pickles | pickles+encoder: rows from the encoder, from "
                        "Cosmos t5_xxl/<stem>.pickle files, or pickles where present (docs/text.md)")
    parser.add_argument("--no-empty-prompt", dest="empty_prompt", action="store_const", const=False,
                        help="write no empty_prompt.h5 (lets a pickles-only build run without a T5 folder)")
    parser.add_argument("--device", help="cpu | cuda | cuda:N")
    parser.add_argument("--limit", type=int, help="keep the first N samples of the plan")
    parser.add_argument("--on-missing-caption", help="reject | empty")
    parser.add_argument("--max-reject-fraction", type=float, help="stop when more than this fraction of the samples "
                        "is rejected (default 0.5)")
    parser.add_argument("--procs", type=int, help="encoder processes on --device (default 1)")
    parser.add_argument("--gpus", help="all | 0,1,...: one encoder process per GPU")
    parser.add_argument("--workers-per-gpu",
                        help="CPU decode workers per encoder process: auto (default) or N (0: inline)")
    parser.add_argument("--executor", help="local | ray: where units run (docs/execution.md)")
    parser.add_argument("--ray-address", help="with --executor ray: auto | HOST:PORT of the Ray cluster")
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on 127.0.0.1:PORT (the main "
                        "process) and PORT+1+r (rank r) while the build runs (docs/execution.md)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any config key")


def config_from_args(args: argparse.Namespace):
    from ..config.loading.flags import config_from_flags

    return config_from_flags(vars(args), args.config, args.set, args.preset)


def console(stderr: bool = False) -> Console:
    """Output as written: paths, ids and pip extras such as 'latentforge[ray]' are never read as markup."""
    return Console(stderr=stderr, markup=False, highlight=False, soft_wrap=True)


def by_reason(rejects: dict[str, int]) -> str:
    """' (too_short 2, unreadable 1)', or nothing without rejects."""
    return f" ({', '.join(f'{reason} {count}' for reason, count in rejects.items())})" if rejects else ""


def say(text: Any, stderr: bool = False) -> None:
    console(stderr).print(text)
