"""`latentforge query ROOT WHERE`: the rows of a cache's manifest that satisfy an SQL condition."""

from __future__ import annotations

import argparse

from .common import say


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("query", help="list the rows of a cache whose manifest satisfies an SQL condition")
    parser.add_argument("root", help="cache root (the folder holding manifest.parquet)")
    parser.add_argument("where", help="SQL condition over manifest.parquet's columns, e.g. "
                        "\"caption LIKE '%%car%%' AND num_frames >= 93\"")
    parser.add_argument("--ids", action="store_true", help="print only sample ids, one a line")
    parser.add_argument("--count", action="store_true", help="print only the number of matching rows")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..sinks.manifest_query import query_rows

    rows = query_rows(args.root, args.where)
    if args.count:
        print(len(rows))
    elif args.ids:
        print("".join(f"{sample_id}\n" for _, sample_id in rows), end="")
    else:
        print("".join(f"{index}\t{sample_id}\n" for index, sample_id in rows), end="")
        say(f"{len(rows)} row(s) match", stderr=True)
    return 0
