"""`latentforge verify ROOT [--deep ...]`: thin wrapper over verify.verify_integrity and verify_deep.verify_deep."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("verify", help="prove a cache is intact, and with --deep faithful (exit 1 on any "
                                   "failure)")
    parser.add_argument("root")
    parser.add_argument("--allow-incomplete", action="store_true", help="do not require _CACHE_COMPLETE")
    deep = parser.add_argument_group("deep verify (docs/verify.md)")
    deep.add_argument("--deep", action="store_true", help="re-read, re-encode, decode and compare spot samples")
    deep.add_argument("--spot", type=int, default=4, help="spot samples, spread evenly over the cache (default 4)")
    deep.add_argument("--index", type=int, action="append", help="check this dataset_index (repeatable; replaces "
                      "--spot)")
    deep.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    deep.add_argument("--dataset", action="append", help="the dataset's location now, if it moved (repeatable, as "
                      "dataset.path)")
    deep.add_argument("--tokenizer-checkpoint", help="the tokenizer checkpoint on this machine (its SHA-256 must "
                      "equal cache_config.json's)")
    deep.add_argument("--text-path", help="the text model folder on this machine")
    for name, what in (("fail-psnr", "fail below this PSNR in dB"), ("warn-psnr", "warn below this PSNR in dB"),
                       ("fail-ssim", "fail below this SSIM"), ("warn-ssim", "warn below this SSIM")):
        deep.add_argument(f"--{name}", type=float, help=f"{what} (defaults: docs/verify.md)")
    deep.add_argument("--report", help="where to write the JSON report (default ROOT/build/verify_report.json)")
    parser.set_defaults(run=run)


def _table(checks, title: str, level: str = "[green]ok[/green]"):
    from rich.table import Table

    table = Table("check", "result", "detail", title=title)
    for check in checks:
        where = f" (dataset_index {check.dataset_index})" if check.dataset_index is not None else ""
        table.add_row(check.name, level if check.ok else "[red]FAIL[/red]", check.detail + where)
    return table


def _quality_table(report):
    from rich.table import Table

    colour = {"ok": "green", "warn": "yellow", "fail": "red"}
    table = Table("dataset_index", "modality", "PSNR dB", "SSIM", "verdict", title="reconstruction quality")
    for q in report.quality:
        verdict = q.verdict(report.thresholds)
        table.add_row(str(q.dataset_index), q.modality, f"{q.psnr_db:.2f}", f"{q.ssim:.4f}",
                      f"[{colour[verdict]}]{verdict}[/{colour[verdict]}]")
    return table


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    console = Console()
    if not args.deep:
        from ..verify import verify_integrity

        report = verify_integrity(Path(args.root), require_complete=not args.allow_incomplete)
        console.print(_table(report.checks, "integrity"))
    else:
        from ..quality import QualityThresholds
        from ..reencode import Overrides
        from ..verify_deep import verify_deep

        overrides = Overrides(tuple(args.dataset or ()), args.tokenizer_checkpoint, args.text_path, args.device)
        given = {k: getattr(args, k) for k in ("fail_psnr", "warn_psnr", "fail_ssim", "warn_ssim")}
        thresholds = QualityThresholds(**{k: v for k, v in given.items() if v is not None})
        report = verify_deep(Path(args.root), args.spot, overrides, thresholds, args.index,
                             require_complete=not args.allow_incomplete,
                             report_path=Path(args.report) if args.report else None)
        integrity = report.integrity
        if integrity.ok:
            console.print(f"integrity: {len(integrity.checks)} checks passed")
        else:
            console.print(_table(integrity.checks, "integrity"))
        console.print(_table(report.checks, "deep"))
        skipped = [w for w in report.warnings if w.name != "quality"]  # quality warnings: in the quality table
        if skipped:
            console.print(_table(skipped, "warnings", "[yellow]warn[/yellow]"))
        if report.quality:
            console.print(_quality_table(report))
        console.print(f"latent comparison: {report.comparison}")
    console.print("[green]cache verified[/green]" if report.ok else "[red]cache FAILED verification[/red]")
    return 0 if report.ok else 1
