"""`latentforge scan`: thin wrapper over latentforge.builder.scan.scan (the CPU-only probe and estimates)."""

from __future__ import annotations

import argparse

from .common import add_input_arguments, by_reason, config_from_args, say


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("scan", help="probe every input on CPU: rejects, size and time estimates")
    add_input_arguments(parser)
    parser.add_argument("--calibrate", type=int, default=0,
                        help="also time N samples through the tokenizer on --device for a GPU-time estimate")
    parser.add_argument("--quiet", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..builder.scan import scan

    result = scan(config_from_args(args), calibrate=args.calibrate, quiet=args.quiet)
    say(f"planned {result.planned}, accepted {result.accepted}, rejected "
        f"{sum(result.rejects_by_reason.values())}{by_reason(result.rejects_by_reason)} -> {result.rejects_path}")
    if result.buckets is not None:
        say("buckets " + ", ".join(f"{name} {count}" for name, count in result.buckets.items()))
    say(f"output estimate {result.output_bytes / 2**30:.3f} GiB, free {result.free_bytes / 2**30:.1f} GiB: "
        + ("fits" if result.disk_ok else "does not fit"))
    if result.encode_hours is not None:
        say(f"encode ~{result.encode_seconds_per_sample:.3f} s/sample -> ~{result.encode_hours:.2f} h over all ranks")
    if result.reject_problem is not None:
        say(f"error: a build would stop: {result.reject_problem}", stderr=True)
    return 0 if result.disk_ok and result.reject_problem is None else 1
