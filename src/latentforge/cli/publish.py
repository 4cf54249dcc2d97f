"""CLI verbs `publish` and `fetch`: thin wrappers over latentforge.transfer.publish / fetch."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

import yaml
from rich.filesize import decimal

from ..builder.progress import BYTES, ProgressBars
from ..errors import ConfigError
from ..locations import local_folder
from ..transfer import Destination, FetchOptions, PublishOptions, TransferEvent, fetch, publish
from .common import say
from .progress import progress_bars

_MIB = 1 << 20


def add_parser(subparsers: Any) -> None:
    """Register `publish` and `fetch`; each sets `run` to a callable taking the parsed args, returning an exit code."""
    defaults = PublishOptions()
    pub = subparsers.add_parser(
        "publish",
        help="upload a built cache to object storage; _SUCCESS last, once every object is confirmed",
        description="Upload ROOT (everything but build/) to each DEST: s3://BUCKET/PREFIX (AWS or an S3-compatible "
        "endpoint via -o endpoint_url=...), gs://..., file:///DIR. Resumable: a rerun uploads only what is missing "
        "or wrong.",
    )
    pub.add_argument("root", type=Path, help="cache root with _CACHE_COMPLETE and SHA256SUMS")
    pub.add_argument("dest", nargs="+", help="destination URL(s)")
    pub.add_argument("--workers", type=int, default=defaults.workers, help="parallel uploads (default %(default)s)")
    pub.add_argument("--part-size-mib", type=int, default=defaults.part_size // _MIB,
                     help="multipart part size in MiB, 5..5120 (default %(default)s)")
    pub.add_argument("--verify-remote", action="store_true", help="also download and hash every object")
    pub.add_argument("--no-server-checksum", action="store_true",
                     help="do not ask S3 for a SHA-256 checksum (for S3-compatible servers without checksums)")
    _add_storage_options(pub)
    pub.set_defaults(run=run_publish)

    get = subparsers.add_parser(
        "fetch",
        help="download a published cache and run its SHA256SUMS check",
        description="Download SOURCE into ROOT, check every file against SHA256SUMS, and only then write "
        "_CACHE_COMPLETE and _SUCCESS locally.",
    )
    get.add_argument("source", help="URL a cache was published to")
    get.add_argument("root", help="local folder to fill: new, empty, or an earlier fetch of the cache (a path or a "
                     "file:// URL)")
    get.add_argument("--workers", type=int, default=defaults.workers, help="parallel downloads (default %(default)s)")
    get.add_argument("--allow-unpublished", action="store_true",
                     help="fetch even if SOURCE has no _SUCCESS (the check still runs; no local _SUCCESS)")
    _add_storage_options(get)
    get.set_defaults(run=run_fetch)


def _add_storage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="fsspec storage option for every URL, value parsed as YAML "
                        "(e.g. endpoint_url=http://host:9000, profile=NAME, client_kwargs={region_name: us-east-1})")


def parse_storage_options(pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, separator, raw = pair.partition("=")
        if not separator or not key.strip():
            raise ConfigError(f"storage option {pair!r} must look like KEY=VALUE, e.g. endpoint_url=http://host:9000")
        options[key.strip()] = yaml.safe_load(raw) if raw else ""
    return options


def _event_printer(bars: ProgressBars) -> Callable[[TransferEvent], None]:
    """A line per object moved, with why, above the bars (confirmations are counted by the bars only)."""

    def show(event: TransferEvent) -> None:
        if event.action != "confirmed":
            bars.say(f"{event.action} {event.destination.rstrip('/')}/{event.path} ({decimal(event.size)}): "
                     f"{event.reason}")

    return show


def run_publish(args: argparse.Namespace) -> int:
    storage = parse_storage_options(args.storage_option)
    with progress_bars(BYTES) as bars:
        options = PublishOptions(
            workers=args.workers,
            part_size=args.part_size_mib * _MIB,
            verify_remote=args.verify_remote,
            server_checksum=not args.no_server_checksum,
            on_event=_event_printer(bars),
            progress=bars.start,
        )
        report = publish(args.root, [Destination(url, storage) for url in args.dest], options)
    for dest in report.destinations:
        say(f"{dest.url}: {len(dest.uploaded)} uploaded ({decimal(dest.bytes_uploaded)}), "
            f"{len(dest.copied)} copied there from an earlier version ({decimal(dest.bytes_copied)}), "
            f"{len(dest.already_confirmed)} already there, {len(dest.removed)} of an earlier version removed; "
            f"{report.objects_per_destination} objects confirmed")
    say(f"published {report.root} ({decimal(report.bytes_per_destination)}) to {', '.join(args.dest)}; _SUCCESS "
        f"written at {len(report.destinations)} destination(s) and in {report.root}")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    source = Destination(args.source, parse_storage_options(args.storage_option))
    with progress_bars(BYTES) as bars:
        options = FetchOptions(workers=args.workers, require_success=not args.allow_unpublished,
                               on_event=_event_printer(bars), progress=bars.start)
        report = fetch(source, Path(local_folder(args.root, "the fetch destination")), options)
    say(f"fetched {args.source} into {report.root}: {len(report.downloaded)} files downloaded "
        f"({decimal(report.bytes_downloaded)}), {len(report.already_present)} already present; SHA256SUMS check "
        "passed")
    return 0
