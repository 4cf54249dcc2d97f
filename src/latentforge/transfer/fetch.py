"""`latentforge fetch SOURCE ROOT`: download a published cache and run its SHA256SUMS check.

The local `_CACHE_COMPLETE` and `_SUCCESS` are written only after every listed file matches, so a
corrupted remote object can never produce a local cache that claims to be whole. A rerun keeps files that
already match and downloads the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..cache.checksums import checksummed_files, read_sha256sums
from ..cache.layout import COMPLETE_MARKER, PUBLISHED_MARKER, SUMS
from ..errors import CacheIntegrityError, LatentforgeError
from ..hashing import sha256_file
from ..io import inside
from .destinations import Destination, TransferEvent, open_remote
from .pool import run_parallel
from .publish import PublishOptions
from .stores import Remote


@dataclass(frozen=True)
class FetchOptions:
    workers: int = 8
    require_success: bool = True  # refuse a source whose publish never finished
    on_event: Callable[[TransferEvent], None] | None = None


@dataclass
class FetchReport:
    root: Path
    downloaded: list[str] = field(default_factory=list)
    already_present: list[str] = field(default_factory=list)
    bytes_downloaded: int = 0


def fetch(source: Destination, root: Path, options: FetchOptions = FetchOptions()) -> FetchReport:
    root = Path(root)
    defaults = PublishOptions()
    remote = open_remote(source.url, source.storage_options, defaults.part_size, defaults.server_checksum)
    published = remote.size(PUBLISHED_MARKER) is not None
    if options.require_success and not published:
        raise CacheIntegrityError(
            f"{source.url}: no {PUBLISHED_MARKER}, so its publish did not finish; publish it again, or pass "
            "--allow-unpublished to fetch it anyway (the SHA256SUMS check still runs)"
        )
    for name in (SUMS, COMPLETE_MARKER):
        if remote.size(name) is None:
            raise CacheIntegrityError(f"{source.url}: no {name}; this is not a committed cache")
    root.mkdir(parents=True, exist_ok=True)
    # Withdraw the local claims first: they come back only if this fetch ends in a passing check.
    for marker in (PUBLISHED_MARKER, COMPLETE_MARKER):
        (root / marker).unlink(missing_ok=True)
    remote.download(SUMS, root / SUMS)
    listed, unparsable = read_sha256sums(root)
    if unparsable:
        raise CacheIntegrityError(f"{source.url}/{SUMS} does not parse:\n  " + "\n  ".join(unparsable))

    report = FetchReport(root)
    items = sorted(listed.items())
    outcomes = run_parallel(lambda item: _fetch_one(remote, root, item[0], item[1], options), items, options.workers)
    problems = [problem for problem, _ in outcomes if problem]
    stray = sorted(set(checksummed_files(root)) - set(listed))
    problems += [f"{rel}: present but not listed in {SUMS}" for rel in stray]
    if problems:
        raise CacheIntegrityError(
            f"{root}: SHA256SUMS check failed after fetching {source.url}; no marker written:\n  "
            + "\n  ".join(problems)
        )
    for (rel, _), (_, downloaded) in zip(items, outcomes):
        (report.downloaded if downloaded else report.already_present).append(rel)
        report.bytes_downloaded += (root / rel).stat().st_size if downloaded else 0
    remote.download(COMPLETE_MARKER, root / COMPLETE_MARKER)
    if published:
        remote.download(PUBLISHED_MARKER, root / PUBLISHED_MARKER)
    return report


def _fetch_one(remote: Remote, root: Path, rel: str, expected: str, options: FetchOptions) -> tuple[str | None, bool]:
    """(problem or None, whether it was downloaded). A local file that already matches is kept."""
    try:
        local = inside(root, root / rel)
    except LatentforgeError as error:
        return f"{rel}: {error}", False
    if local.is_file() and sha256_file(local) == expected:
        return None, False
    try:
        remote.download(rel, local)
    except FileNotFoundError:
        return f"{rel}: listed in {SUMS} but missing at {remote.url}", False
    if options.on_event:
        options.on_event(TransferEvent(remote.url, rel, "downloaded", local.stat().st_size))
    actual = sha256_file(local)
    if actual != expected:
        return f"{rel}: sha256 {actual} differs from {SUMS} ({expected})", True
    return None, True
