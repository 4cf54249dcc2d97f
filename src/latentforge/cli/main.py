"""`latentforge` command line: one thin verb module per library function."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from rich.console import Console

from ..errors import ConfigError, LatentforgeError

# verb modules, each with add_parser(subparsers) and the run function it sets as the parser default
VERB_MODULES = ("build", "verify", "inspect", "demo", "cosmos", "publish", "stats", "preview")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="latentforge", description="Turn raw video datasets into training-ready latent caches."
    )
    subparsers = parser.add_subparsers(dest="verb", required=True)
    for name in VERB_MODULES:
        try:
            module = importlib.import_module(f"latentforge.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name == f"latentforge.cli.{name}":
                continue
            raise
        module.add_parser(subparsers)
    return parser


def _quiet_model_loading() -> None:
    """transformers/huggingface progress bars and notices would bury our own progress and tables."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")


def main(argv: list[str] | None = None) -> int:
    _quiet_model_loading()
    args = make_parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        return int(args.run(args) or 0)
    except ConfigError as error:
        console.print(f"[red]config error:[/red] {error}")
        return 2
    except LatentforgeError as error:
        console.print(f"[red]error:[/red] {error}")
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]; rerun the same command to resume")
        return 130


if __name__ == "__main__":
    sys.exit(main())
