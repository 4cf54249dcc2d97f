"""`latentforge verify ROOT [--deep ...]`: thin wrapper over latentforge.verification.entry.verify."""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text


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
    deep.add_argument("--device", default="auto", help="auto (default: cuda when torch sees a GPU, else cpu) | "
                      "cpu | cuda | cuda:N")
    deep.add_argument("--dataset", action="append", help="the dataset's location now, if it moved (repeatable, as "
                      "dataset.path)")
    deep.add_argument("--tokenizer-checkpoint", help="the tokenizer checkpoint on this machine (its SHA-256 must "
                      "equal cache_config.json's)")
    deep.add_argument("--text-path", help="the text model folder on this machine")
    deep.add_argument("--image-encoder-path", help="the image encoder's checkpoint on this machine (its SHA-256 "
                      "must equal the one cache_config.json records)")
    for name, what in (("fail-psnr", "fail below this PSNR in dB"), ("warn-psnr", "warn below this PSNR in dB"),
                       ("fail-ssim", "fail below this SSIM"), ("warn-ssim", "warn below this SSIM")):
        deep.add_argument(f"--{name}", type=float, help=f"{what} (defaults: docs/verify.md)")
    deep.add_argument("--report", help="where to write the JSON report (default ROOT/build/verify_report.json)")
    parser.set_defaults(run=run)


def _table(checks, title: str, passed: Text = Text("ok", style="green")) -> Table:
    table = Table("check", "result", "detail", title=title)
    for check in checks:
        where = f" (dataset_index {check.dataset_index})" if check.dataset_index is not None else ""
        table.add_row(check.name, passed if check.ok else Text("FAIL", style="red"), Text(check.detail + where))
    return table


def _quality_table(report) -> Table:
    colour = {"ok": "green", "warn": "yellow", "fail": "red"}
    table = Table("dataset_index", "modality", "PSNR dB", "SSIM", "verdict", title="reconstruction quality")
    for q in report.quality:
        verdict = q.verdict(report.thresholds)
        table.add_row(str(q.dataset_index), q.modality, f"{q.psnr_db:.2f}", f"{q.ssim:.4f}",
                      Text(verdict, style=colour[verdict]))
    return table


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..cache.root import CacheRoot
    from ..devices import choose_device, device_note
    from ..verification.entry import verify
    from .common import console
    from .progress import progress_bars

    CacheRoot.of(args.root).require_cache()  # a root that is no cache: its one line before any note or table
    out = console()
    if not args.deep:
        with progress_bars("samples") as bars:
            report = verify(args.root, require_complete=not args.allow_incomplete, progress=bars.start)
        out.print(_table(report.checks, "integrity"))
        if report.warnings:
            out.print(_table(report.warnings, "warnings", Text("warn", style="yellow")))
    else:
        from ..verification.quality import QualityThresholds
        from ..verification.reencode import Overrides

        overrides = Overrides(tuple(args.dataset or ()), args.tokenizer_checkpoint, args.text_path,
                              choose_device(args.device), args.image_encoder_path)
        out.print(f"deep verify {device_note(overrides.device)}")
        given = {k: getattr(args, k) for k in ("fail_psnr", "warn_psnr", "fail_ssim", "warn_ssim")}
        thresholds = QualityThresholds(**{k: v for k, v in given.items() if v is not None})
        with progress_bars("samples") as bars:
            report = verify(args.root, deep=True, require_complete=not args.allow_incomplete, spot=args.spot,
                            indices=args.index, overrides=overrides, thresholds=thresholds,
                            report_path=Path(args.report) if args.report else None, progress=bars.start)
        integrity = report.integrity
        if integrity.ok:
            out.print(f"integrity: {len(integrity.checks)} checks passed")
        else:
            out.print(_table(integrity.checks, "integrity"))
        out.print(_table(report.checks, "deep"))
        # quality warnings (`quality`, or `<bucket>/quality` on a bucketed root) have their own table
        skipped = integrity.warnings + [w for w in report.warnings if w.name.rsplit("/", 1)[-1] != "quality"]
        if skipped:
            out.print(_table(skipped, "warnings", Text("warn", style="yellow")))
        if report.quality:
            out.print(_quality_table(report))
        out.print(f"latent comparison: {report.comparison}")
    out.print(Text("cache verified", style="green") if report.ok else Text("cache FAILED verification", style="red"))
    if args.deep:
        out.print(f"wrote the report to {report.path}")
    return 0 if report.ok else 1
