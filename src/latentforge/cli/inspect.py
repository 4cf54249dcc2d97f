"""`latentforge inspect ROOT`: what a cache holds, as a short summary or as JSON."""

from __future__ import annotations

import argparse
import json

from .common import by_reason, say


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("inspect", help="summarise a cache: counts, shards, datasets, config")
    parser.add_argument("root")
    parser.add_argument("--json", action="store_true", help="print the whole summary as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..cache.inspect import inspect_cache

    summary = inspect_cache(Path(args.root))
    if args.json:
        print(json.dumps(summary.to_json(), indent=2, ensure_ascii=False))
        return 0
    config = summary.config
    state = "complete" if summary.complete else "not complete (no _CACHE_COMPLETE)"
    lines = [
        f"{summary.root}: {state}{', published' if summary.published else ''}",
        f"  samples   {config.num_samples} in {len(summary.shards)} shard(s), {summary.bytes / 2**20:.1f} MiB; "
        f"rejected {sum(summary.rejects.values())}{by_reason(summary.rejects)}",
        f"  preset    {config.preset}",
        f"  latent    {config.latent.dataset} {config.storage_dtype} {list(config.latent.shape)}: "
        + ", ".join(f"{m.name} {m.channels[0]}..{m.channels[1] - 1}" for m in config.latent.modalities),
        f"  tokenizer {config.tokenizer_name} ({config.precision})"
        + (f", checkpoint sha256 {config.checkpoint_sha256}" if config.checkpoint_sha256 else ""),
        "  text      none" if config.text is None else
        f"  text      {config.text.name} [{config.text.max_length}, {config.text.dim}] in "
        f"{config.text.embeddings_dataset}",
        f"  frames    {config.frames.get('num_frames')} at {config.frames.get('height')}x{config.frames.get('width')}, "
        f"fps {config.frames.get('fps')}",
    ]
    say("\n".join(lines))
    return 0
