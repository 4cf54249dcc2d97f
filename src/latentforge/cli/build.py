"""`latentforge build`: thin wrapper over latentforge.builder.run.build."""

from __future__ import annotations

import argparse
import shlex

from ..cache.layout import REJECTS
from .common import add_input_arguments, by_reason, config_from_args, say


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("build", help="build a latent cache (resumes when rerun)")
    add_input_arguments(parser)
    parser.add_argument("--no-encode", action="store_true", help="only probe the input (same as `scan`)")
    parser.add_argument("--overwrite", action="store_true", help="start over instead of resuming")
    parser.add_argument("--extend", action="store_true",
                        help="add the samples the input gained to the cache built here; existing rows keep "
                             "their dataset_index and bytes (docs/extend.md)")
    parser.add_argument("--recheck", action="store_true",
                        help="trust no record of an earlier run: probe every source again and read the committed "
                             "cache whole instead of trusting its files' sizes and mtimes (docs/execution.md)")
    parser.add_argument("--quiet", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.no_encode:
        from .scan import run as run_scan

        args.calibrate = 0
        return run_scan(args)
    from ..builder.run import build

    result = build(config_from_args(args), overwrite=args.overwrite, quiet=args.quiet, extend=args.extend,
                   recheck=args.recheck)
    if args.extend:
        say(f"extended: {len(result.added_ids)} new sample id(s) planned")
    if result.removed_ids:
        shown = ", ".join(result.removed_ids[:5]) + (" ..." if len(result.removed_ids) > 5 else "")
        say(f"  {len(result.removed_ids)} id(s) no longer in the input were kept in the cache: {shown}")
    rejects = sum(result.rejects_by_reason.values())
    say(f"built {result.root}: {result.num_samples} samples, {rejects} rejected{by_reason(result.rejects_by_reason)} "
        f"in {result.seconds:.1f} s; verified")
    say(f"  rejects: {result.root}/{REJECTS}; run stats: {result.stats_path}; next: latentforge inspect "
        f"{shlex.quote(str(result.root))}")
    return 0
