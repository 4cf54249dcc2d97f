"""`latentforge inspect ROOT`: what a cache holds, as a short summary or as JSON."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from .common import by_reason, say

if TYPE_CHECKING:
    from ..cache.summary import CacheSummary
    from ..sinks.hdf5.inspect import BucketedSummary


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("inspect", help="summarise a cache: counts, shards, datasets, config")
    parser.add_argument("root")
    parser.add_argument("--json", action="store_true", help="print the whole summary as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..cache.summary import CacheSummary
    from ..sinks.dispatch import sink_for_root

    sink, root = sink_for_root(args.root)
    summary = sink.inspect(root)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2, ensure_ascii=False))
        return 0
    say(_cache_lines(summary) if isinstance(summary, CacheSummary) else _bucketed_lines(summary))
    return 0


def _bucketed_lines(summary: BucketedSummary) -> str:
    state = "complete" if summary.complete else "not complete (no _CACHE_COMPLETE)"
    lines = [f"{summary.root}: {state}{', published' if summary.published else ''}; "
             f"{summary.index.num_samples} samples in {len(summary.buckets)} bucket(s); rejected before a bucket "
             f"was chosen {sum(summary.rejects.values())}{by_reason(summary.rejects)}"]
    for entry in summary.index.buckets:
        shape = "-" if entry.latent_shape is None else str(list(entry.latent_shape))
        lines.append(f"  {entry.name:<16} {entry.num_samples:>8} samples  latent {shape}  {entry.path or '(empty)'}")
    return "\n".join(lines)


def _cache_lines(summary: CacheSummary) -> str:
    from ..cache.root import DEFAULT_SINK

    config = summary.config
    state = "complete" if summary.complete else "not complete (no _CACHE_COMPLETE)"
    lines = [
        f"{summary.root}: {state}{', published' if summary.published else ''}",
        f"  format    {(summary.datasets.get('sink') or {}).get('name', DEFAULT_SINK)}",
        f"  samples   {config.num_samples} in {len(summary.shards)} shard(s), {summary.bytes / 2**20:.1f} MiB; "
        f"rejected {sum(summary.rejects.values())}{by_reason(summary.rejects)}",
        f"  preset    {config.preset}",
        f"  latent    {config.latent.dataset} {config.latent_dtype} {list(config.latent.shape)}: "
        + ", ".join(f"{m.name} {m.channels[0]}..{m.channels[1] - 1}" for m in config.latent.modalities),
        f"  tokenizer {config.tokenizer_name} ({config.precision})"
        + (f", checkpoint sha256 {config.checkpoint_sha256}" if config.checkpoint_sha256 else ""),
        "  text      none" if config.text is None else
        f"  text      {config.text.name} [{config.text.max_length}, {config.text.dim}] in "
        f"{config.text.embeddings_dataset}",
        f"  frames    {config.frames.get('num_frames')} at {config.frames.get('height')}x{config.frames.get('width')}, "
        f"fps {config.frames.get('fps')}",
    ]
    records = summary.records
    if records is not None:
        staged = "no staged unit arrays (each commit hands them to the cache)" if not records.staged_units else \
            f"{records.staged_units} staged unit(s) not committed yet, {records.staged_bytes / 2**20:.1f} MiB"
        lines.append(f"  build/    {records.bytes / 2**20:.1f} MiB of build records (not part of the cache): {staged}")
    return "\n".join(lines)
