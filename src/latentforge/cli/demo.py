"""`latentforge demo`: build and verify a cache of a generated world, end to end."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="generate a small world, build its cache, verify it, report")
    parser.add_argument("--out", default="demo-cache", help="folder for the world, the tiny model and the cache")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tokenizer", default="haar-4x8x8", choices=("haar-4x8x8", "cosmos-dv8x16x16"),
                        help="haar-4x8x8 (default: float latents) or cosmos-dv8x16x16 (a tiny random Cosmos DV "
                             "tokenizer: a discrete-token cache and its token statistics)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table
    from rich.text import Text

    from ..demo.next_steps import activation_hint, next_commands
    from ..demo.run import run_demo
    from .common import console, say

    report = run_demo(args.out, device=args.device, tokenizer=args.tokenizer)
    table = Table("what", "value", title="latentforge demo")
    table.add_row("cache", str(report.root))
    table.add_row("samples", f"{report.num_samples} cached, {report.num_rejects} rejected (see rejects.jsonl)")
    if report.tokens is None:
        table.add_row("latent per sample", f"{list(report.latent_shape)} float16 (rgb, mask, depth x 16 channels)")
    else:
        _token_rows(table, report)
    table.add_row("text per sample", f"{list(report.text_shape)} float16 (untrained tiny T5)")
    table.add_row("bytes on disk", f"{report.cache_bytes:,}")
    table.add_row("time", f"{report.seconds:.1f} s")
    what = "haar-4x8x8 decode vs encoded frames" if report.tokens is None else "untrained tokenizer: not judged"
    for name, value in report.psnr_db.items():
        table.add_row(f"PSNR {name}", f"{value:.2f} dB ({what})")
    table.add_row("verify", Text("passed", style="green") if report.verified else Text("FAILED", style="red"))
    console().print(table)
    if not report.verified:
        return 1
    commands = next_commands(report.root, tokens=report.tokens is not None)
    width = max(len(command) for command, _ in commands)
    hint = activation_hint()
    say("\nnext, try these on the cache" + (f" (after `{hint}`):" if hint else ":"))
    for command, what in commands:
        say(f"  {command.ljust(width)}  # {what}")
    return 0


def _token_rows(table, report) -> None:
    """What a discrete-token demo cache holds and its token statistics (also in ROOT/build/stats/report.html)."""
    tokens = report.tokens
    table.add_row("token ids per sample", f"{list(report.latent_shape)} uint16 (rgb, mask, depth: one stream each, "
                  f"{list(tokens.sequence_lengths)[0]} tokens)")
    table.add_row("vocabulary used", f"{tokens.used_ids} of {tokens.vocabulary} ids ({tokens.utilisation:.2%})")
    table.add_row("top ids", ", ".join(f"{int(i)} ({f:.1%})" for i, _, f in tokens.top_ids[:5]))
    table.add_row("entropy per sample", f"{tokens.entropy_bits['mean']:.2f} bits (lowest: "
                  + ", ".join(f"{s.sample_id} {s.entropy_bits:.2f}" for s in tokens.low_entropy[:2]) + ")")
    table.add_row("token report", str(report.root / "build" / "stats" / "report.html"))
