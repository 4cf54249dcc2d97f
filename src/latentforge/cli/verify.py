"""`latentforge verify ROOT`: thin wrapper over latentforge.verify.verify_integrity."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("verify", help="prove a cache is intact (exit 1 on any failure)")
    parser.add_argument("root")
    parser.add_argument("--allow-incomplete", action="store_true", help="do not require _CACHE_COMPLETE")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from ..verify import verify_integrity

    report = verify_integrity(Path(args.root), require_complete=not args.allow_incomplete)
    table = Table("check", "result", "detail")
    for check in report.checks:
        where = f" (dataset_index {check.dataset_index})" if check.dataset_index is not None else ""
        table.add_row(check.name, "[green]ok[/green]" if check.ok else "[red]FAIL[/red]", check.detail + where)
    console = Console()
    console.print(table)
    console.print("[green]cache verified[/green]" if report.ok else "[red]cache FAILED verification[/red]")
    return 0 if report.ok else 1
