"""`latentforge inspect ROOT`: print what a cache holds."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("inspect", help="summarise a cache: counts, shards, datasets, config")
    parser.add_argument("root")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from rich.console import Console

    from ..inspect_cache import inspect_cache

    summary = inspect_cache(Path(args.root))
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        Console().print(summary)
    return 0
