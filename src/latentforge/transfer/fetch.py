"""`latentforge fetch SOURCE ROOT`: download a published cache and run its SHA256SUMS check.

The SHA256SUMS downloaded must be the one the remote `_SUCCESS` vouches for: a remote whose shards and
SHA256SUMS were both replaced after publish agrees with itself, but not with `_SUCCESS`. Nothing under ROOT is
touched until everything is checked: the remote's markers and SHA256SUMS are read into memory, the files to
download land in a staging folder beside ROOT (`.<name>.fetching`) and are hashed there, and only when every
listed file matches do they replace ROOT's files, with ROOT's markers withdrawn just before and written again
last. A refused fetch leaves a good local copy whole, markers included. A rerun keeps files that already match
(in ROOT or in the staging folder) and downloads the rest.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..cache.checksums import checksummed_files
from ..cache.layout import COMPLETE_MARKER, PUBLISHED_MARKER, RUN_RECORDS_DIR, SUMS, bucket_markers
from ..cache.ownership import made_by_latentforge
from ..cache.root import CacheRoot
from ..errors import CacheIntegrityError, ConfigError, LatentforgeError
from ..hashing import parse_sums, sha256_file
from ..io import inside, write_bytes_atomic
from ..progress import Progress, start_step
from .destinations import Destination, TransferEvent, open_remote
from .pool import run_parallel
from .publish import PublishOptions
from .stores import Remote
from .success_marker import sums_digest_claimed

MISSING_LOCALLY = "missing locally"
DIFFERS_LOCALLY = "local copy differs from SHA256SUMS"


@dataclass(frozen=True)
class FetchOptions:
    workers: int = 8
    require_success: bool = True  # refuse a source whose publish never finished
    on_event: Callable[[TransferEvent], None] | None = None
    # progress(step, total bytes) as each step starts ("check": hashing local files already there, "download");
    # returns the function advanced by bytes done, from worker threads
    progress: Progress | None = None


@dataclass
class FetchReport:
    root: Path
    downloaded: list[str] = field(default_factory=list)
    already_present: list[str] = field(default_factory=list)
    bytes_downloaded: int = 0


def fetch(source: Destination, root: Path, options: FetchOptions = FetchOptions()) -> FetchReport:
    root = Path(root)
    _check_destination(root)
    defaults = PublishOptions()
    remote = open_remote(source.url, source.storage_options, defaults.part_size, defaults.server_checksum)
    published = _read_marker(remote, PUBLISHED_MARKER)
    if options.require_success and published is None:
        raise CacheIntegrityError(
            f"{source.url}: no {PUBLISHED_MARKER}, so its publish did not finish; publish it again, or pass "
            "--allow-unpublished to fetch it anyway (the SHA256SUMS check still runs)"
        )
    for name in (SUMS, COMPLETE_MARKER):
        if remote.size(name) is None:
            raise CacheIntegrityError(f"{source.url}: no {name}; this is not a committed cache")
    sums = _read_marker(remote, SUMS)
    if published is not None:
        _refuse_sums_not_vouched_for(sums, published, source.url)
    try:
        listed, unparsable = parse_sums(sums.decode("utf-8"), SUMS)
    except UnicodeDecodeError:
        listed, unparsable = {}, [f"{SUMS} is not UTF-8 text"]
    if unparsable:
        raise CacheIntegrityError(f"{source.url}/{SUMS} does not parse:\n  " + "\n  ".join(unparsable))

    stray = sorted(set(checksummed_files(root)) - set(listed)) if root.is_dir() else []
    if stray:  # files of another cache, or the user's: never replaced, never downloaded beside
        raise CacheIntegrityError(f"{root} holds files not in {source.url}/{SUMS}, so it is not a copy of that cache; "
                                  "nothing was downloaded. Fetch into an empty folder, or remove them:\n  "
                                  + "\n  ".join(f"{rel}: present but not listed in {SUMS}" for rel in stray[:10])
                                  + (f"\n  and {len(stray) - 10} more" if len(stray) > 10 else ""))
    report = FetchReport(root)
    staging = staging_folder(root)
    paths, problems = _local_paths(root, listed)
    reasons = _why_download(paths, listed, options)
    kept_staged = _staged_matches(staging, [rel for rel in paths if reasons[rel] is not None], listed, options)
    report.already_present = [rel for rel in paths if reasons[rel] is None or rel in kept_staged]
    wanted = [rel for rel in paths if reasons[rel] is not None and rel not in kept_staged]
    sizes = dict(zip(wanted, run_parallel(remote.size, wanted, options.workers)))
    problems += [f"{rel}: listed in {SUMS} but missing at {remote.url}" for rel in wanted if sizes[rel] is None]
    report.downloaded = [rel for rel in wanted if sizes[rel] is not None]
    received = start_step(options.progress, "download", sum(sizes[rel] for rel in report.downloaded))

    def download(rel: str) -> str | None:
        return _download(remote, rel, staging / rel, listed[rel], reasons[rel], received, options)

    problems += [problem for problem in run_parallel(download, report.downloaded, options.workers) if problem]
    markers = bucket_markers(list(listed))  # not checksummed, so not among the listed files checked above
    problems += [f"{marker}: missing at {remote.url}, so that bucket's cache is not complete there" for marker, size
                 in zip(markers, run_parallel(remote.size, markers, options.workers)) if size is None]
    if problems:
        raise CacheIntegrityError(
            f"{root}: SHA256SUMS check failed after fetching {source.url}; {root} was left as it was:\n  "
            + "\n  ".join(problems)
        )
    replaced = [rel for rel in paths if reasons[rel] is not None]
    marker_bytes = [(marker, _read_marker(remote, marker)) for marker in [*markers, COMPLETE_MARKER]]
    _replace(root, staging, paths, replaced, sums)
    report.bytes_downloaded = sum(paths[rel].stat().st_size for rel in report.downloaded)
    for marker, data in marker_bytes:  # the root's last
        write_bytes_atomic(root / marker, data)
    if published is not None:  # the bytes checked above, not whatever the remote holds by now
        write_bytes_atomic(root / PUBLISHED_MARKER, published)
    return report


def _check_destination(root: Path) -> None:
    """ConfigError, before anything is read or downloaded, unless ROOT is a folder latentforge may fill: absent,
    empty, or a cache it wrote (an earlier fetch or build)."""
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root} is a file; fetch into a folder (a new or empty one, or an earlier fetch of the "
                          "cache)")
    if root.is_dir() and any(root.iterdir()) and not made_by_latentforge(CacheRoot.of(root), root / RUN_RECORDS_DIR):
        raise ConfigError(f"{root} is not empty and is not a latentforge cache; nothing was downloaded. Fetch into a "
                          "new or empty folder")


def staging_folder(root: Path) -> Path:
    """Where a fetch into ROOT downloads before anything under ROOT changes: a hidden sibling of ROOT."""
    return root.parent / f".{root.name}.fetching"


def _staged_matches(staging: Path, rels: list[str], listed: dict[str, str], options: FetchOptions) -> set[str]:
    """The files an earlier, refused fetch left in the staging folder that still match SHA256SUMS."""
    present = [rel for rel in rels if (staging / rel).is_file()]
    matches = run_parallel(lambda rel: sha256_file(staging / rel) == listed[rel], present, options.workers)
    return {rel for rel, match in zip(present, matches) if match}


def _replace(root: Path, staging: Path, paths: dict[str, Path], replaced: list[str], sums: bytes) -> None:
    """Every file checked: ROOT's markers go first (they vouch for the files about to change), then the staged
    files move in (renames, or copies where ROOT is a mount point of its own), SHA256SUMS, and the staging folder
    is removed."""
    root.mkdir(parents=True, exist_ok=True)
    for marker in (PUBLISHED_MARKER, COMPLETE_MARKER):
        (root / marker).unlink(missing_ok=True)
    for rel in replaced:
        paths[rel].parent.mkdir(parents=True, exist_ok=True)
        shutil.move(staging / rel, paths[rel])
    write_bytes_atomic(root / SUMS, sums)
    shutil.rmtree(staging, ignore_errors=True)


def _read_marker(remote: Remote, name: str) -> bytes | None:
    """The bytes of a small object (a marker, SHA256SUMS), or None when it is not there."""
    if remote.size(name) is None:
        return None
    with remote.open_read(name) as handle:
        return handle.read()


def _refuse_sums_not_vouched_for(sums: bytes, marker: bytes, url: str) -> None:
    claimed = sums_digest_claimed(marker, url)
    actual = hashlib.sha256(sums).hexdigest()
    if actual != claimed:
        raise CacheIntegrityError(
            f"{url}/{SUMS} has sha256 {actual}, but {PUBLISHED_MARKER} vouches for {claimed}: the cache was changed "
            f"after it was published (its files may agree with the new {SUMS}); no marker written. Publish the "
            "cache again from a trusted copy"
        )


def _local_paths(root: Path, listed: dict[str, str]) -> tuple[dict[str, Path], list[str]]:
    """Where each listed file goes, in name order; a name that would leave ROOT is a problem instead."""
    paths: dict[str, Path] = {}
    problems: list[str] = []
    for rel in sorted(listed):
        try:
            paths[rel] = inside(root, root / rel)
        except LatentforgeError as error:
            problems.append(f"{rel}: {error}")
    return paths, problems


def _why_download(paths: dict[str, Path], listed: dict[str, str], options: FetchOptions) -> dict[str, str | None]:
    """Why each file must be downloaded, or None for a local copy that already matches SHA256SUMS."""
    present = [rel for rel, local in paths.items() if local.is_file()]
    read = start_step(options.progress, "check", sum(paths[rel].stat().st_size for rel in present))
    matches = run_parallel(lambda rel: sha256_file(paths[rel], read) == listed[rel], present, options.workers)
    reasons: dict[str, str | None] = dict.fromkeys(paths, MISSING_LOCALLY)
    reasons.update((rel, None if match else DIFFERS_LOCALLY) for rel, match in zip(present, matches))
    return reasons


def _download(remote: Remote, rel: str, local: Path, expected: str, reason: str | None,
              received: Callable[[int], None], options: FetchOptions) -> str | None:
    """Download one file into the staging folder; the problem when its bytes do not match SHA256SUMS (the copy is
    dropped), else None."""
    local.parent.mkdir(parents=True, exist_ok=True)
    remote.download(rel, local, received)
    if options.on_event:
        options.on_event(TransferEvent(remote.url, rel, "downloaded", local.stat().st_size, reason or ""))
    actual = sha256_file(local)
    if actual == expected:
        return None
    local.unlink()
    return f"{rel}: sha256 {actual} differs from {SUMS} ({expected})"
