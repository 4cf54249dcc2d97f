"""`latentforge publish ROOT DEST [DEST ...]`: copy a verified cache to one or more stores.

A rerun uploads only what is missing or wrong. `_SUCCESS` is withdrawn first and written last — at every
destination, then locally — only after every object at every destination is confirmed. A destination that holds an
earlier version of the cache is updated in place: the new content (copied within the store from an earlier object
with the same bytes where there is one, store_copies.py), then the earlier version's other objects removed, then the
new SHA256SUMS and markers (earlier_version.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ..cache.layout import COMPLETE_MARKER, PUBLISHED_MARKER, SUMS
from ..cache.whole_read import read_whole
from ..errors import CacheIntegrityError, ConfigError
from ..io import write_bytes_atomic
from ..progress import Progress, start_step
from ..testing.fault_points import fault_point
from .destinations import Destination, TransferEvent, open_remote
from .digests import VerifiedCache, hash_bytes, load_verified_cache
from .earlier_version import earlier_objects, earlier_version, refuse_other_tokenizer, remove_earlier_objects
from .pool import run_parallel
from .store_copies import CopyAttempt, Job, copy_from_earlier
from .stores import LocalDirRemote, Remote
from .success_marker import success_marker

MIB = 1 << 20
# S3's limits on a multipart part (every part but the last).
MIN_PART_SIZE, MAX_PART_SIZE = 5 * MIB, 5 * 1024 * MIB
# Uploaded after everything else, so a remote _CACHE_COMPLETE never sits beside missing shards.
_LAST = (SUMS, COMPLETE_MARKER)


@dataclass(frozen=True)
class PublishOptions:
    workers: int = 8
    part_size: int = 64 * MIB
    verify_remote: bool = False  # also download and hash objects that size and stored checksums vouch for
    server_checksum: bool = True  # S3 ChecksumAlgorithm SHA256; off for S3-compatible servers without it
    on_event: Callable[[TransferEvent], None] | None = None
    # progress(step, total bytes) as each step starts ("hash", "check", "copy" where an earlier version holds some
    # of the bytes, "upload", "confirm"); returns the function advanced by bytes done, from worker threads
    progress: Progress | None = None


@dataclass
class DestinationReport:
    url: str
    uploaded: dict[str, str] = field(default_factory=dict)  # relative path -> why it was (re)uploaded
    # relative path -> the earlier version's object there it was copied from, within the store (not uploaded)
    copied: dict[str, str] = field(default_factory=dict)
    already_confirmed: list[str] = field(default_factory=list)
    bytes_uploaded: int = 0
    bytes_copied: int = 0
    removed: list[str] = field(default_factory=list)  # objects of the earlier version there that this cache dropped


@dataclass(frozen=True)
class PublishReport:
    root: Path
    objects_per_destination: int  # every cache file plus _SUCCESS
    bytes_per_destination: int  # of every cache file (_SUCCESS aside)
    destinations: list[DestinationReport]


def publish(
    root: Path, destinations: Sequence[Destination], options: PublishOptions = PublishOptions()
) -> PublishReport:
    root = Path(root)
    _check_options(options, destinations)
    remotes = [open_remote(d.url, d.storage_options, options.part_size, options.server_checksum) for d in destinations]
    for remote in remotes:
        _refuse_local_overlap(remote, root)
    # one whole cache, even while a build swaps a new one in: a publish the swap cut short is done again from the new
    # one, keeping every object already confirmed
    return read_whole(root, lambda published: _publish(root, published, remotes, options))


def _publish(root: Path, published: Path, remotes: list[Remote], options: PublishOptions) -> PublishReport:
    """publish of the cache at `root`, read from `published` (cache/whole_read.py), where its _SUCCESS goes too: a
    swap moves it into the root with the cache it vouches for."""
    cache = load_verified_cache(published, options.part_size, options.workers, options.progress)
    held = {remote.url: remote.list_files() for remote in remotes}
    for remote in remotes:
        refuse_other_tokenizer(remote, held[remote.url], cache)
    earlier = {remote.url: earlier_version(remote, held[remote.url]) for remote in remotes}
    for remote in remotes:  # refused before any claim is withdrawn: a destination with files of the user's
        remote.discard_partials()
    stale = {remote.url: earlier_objects(remote, cache, earlier[remote.url]) for remote in remotes}
    # Withdraw every earlier claim before touching anything it speaks for.
    (published / PUBLISHED_MARKER).unlink(missing_ok=True)
    for remote in remotes:
        remote.delete(PUBLISHED_MARKER)

    reports = {remote.url: DestinationReport(remote.url) for remote in remotes}
    todo = _find_uploads(remotes, cache, options, reports)
    _withdraw_replaced_markers(todo)
    phases = [[job for job in todo if _upload_phase(job[1]) == n] for n in range(3)]
    _record_copies(copy_from_earlier(phases[0], todo, earlier, cache, options.verify_remote, options.workers,
                                     options.on_event, options.progress), reports)
    phases[0] = [(remote, rel) for remote, rel in phases[0] if rel not in reports[remote.url].copied]
    sent = start_step(options.progress, "upload", sum(cache.digests[rel].size for phase in phases for _, rel in phase))
    _upload_all(phases[0], cache, options, reports, sent)
    confirmed = start_step(options.progress, "confirm", len(remotes) * cache.total_bytes)
    _confirm(remotes, [rel for rel in cache.digests if _upload_phase(rel) == 0], cache, options, reports, confirmed)
    # Only now that the new content is confirmed everywhere; the earlier listings stay until this is done.
    for remote in remotes:
        remove_earlier_objects(remote, stale[remote.url], options.workers, options.on_event)
        reports[remote.url].removed = stale[remote.url]
    for phase in phases[1:]:
        _upload_all(phase, cache, options, reports, sent)
    _confirm(remotes, [rel for rel in cache.digests if _upload_phase(rel) > 0], cache, options, reports, confirmed)
    for report in reports.values():
        report.bytes_uploaded = sum(cache.digests[rel].size for rel in report.uploaded)
        report.bytes_copied = sum(cache.digests[rel].size for rel in report.copied)

    marker = success_marker(cache)
    marker_digest = hash_bytes(marker, options.part_size)
    for remote in remotes:
        fault_point("publish")  # test-only: a kill before this _SUCCESS
        remote.upload(PUBLISHED_MARKER, marker, marker_digest)
        reason = remote.problem(PUBLISHED_MARKER, marker_digest, deep=not remote.stores_checksums)
        if reason:
            raise CacheIntegrityError(f"{remote.url}/{PUBLISHED_MARKER}: {reason}; rerun publish")
    fault_point("publish")
    write_bytes_atomic(published / PUBLISHED_MARKER, marker)
    return PublishReport(root, len(cache.digests) + 1, cache.total_bytes, [reports[remote.url] for remote in remotes])


def _upload_phase(rel: str) -> int:
    """0: content; 1: a bucket's SHA256SUMS and marker; 2: the root's, so no marker precedes what it vouches for."""
    if rel.rsplit("/", 1)[-1] not in _LAST:
        return 0
    return 1 if "/" in rel else 2


def _check_options(options: PublishOptions, destinations: Sequence[Destination]) -> None:
    if not destinations:
        raise ConfigError("publish needs at least one destination URL (s3://BUCKET/PREFIX, gs://..., file:///DIR)")
    urls = [d.url.rstrip("/") for d in destinations]
    if len(set(urls)) != len(urls):
        raise ConfigError(f"destination listed twice in {urls}; give each once")
    if not MIN_PART_SIZE <= options.part_size <= MAX_PART_SIZE:
        raise ConfigError(f"part size {options.part_size} bytes is outside S3's [5 MiB, 5 GiB]; pick one inside")
    if options.workers < 1:
        raise ConfigError(f"workers={options.workers}; use 1 or more")


def _refuse_local_overlap(remote: Remote, root: Path) -> None:
    if not isinstance(remote, LocalDirRemote):
        return
    base, cache_root = remote.base.resolve(), root.resolve()
    if base == cache_root or cache_root in base.parents or base in cache_root.parents:
        raise ConfigError(f"{remote.url} overlaps the cache root {root}; publish to a directory outside it")


def _find_uploads(
    remotes: list[Remote], cache: VerifiedCache, options: PublishOptions, reports: dict[str, DestinationReport]
) -> list[tuple[Remote, str]]:
    jobs = [(remote, rel) for remote in remotes for rel in cache.digests]
    checked = start_step(options.progress, "check", len(remotes) * cache.total_bytes)

    def check(job: tuple[Remote, str]) -> str | None:
        remote, rel = job
        reason = remote.problem(rel, cache.digests[rel], remote.reads_back(options.verify_remote))
        checked(cache.digests[rel].size)
        return reason

    reasons = run_parallel(check, jobs, options.workers)
    for (remote, rel), reason in zip(jobs, reasons):
        if reason is None:
            reports[remote.url].already_confirmed.append(rel)
        else:
            reports[remote.url].uploaded[rel] = reason
    return [job for job, reason in zip(jobs, reasons) if reason is not None]


def _withdraw_replaced_markers(todo: list[tuple[Remote, str]]) -> None:
    """The _CACHE_COMPLETE markers (the root's, each bucket's) that this publish replaces go before any object
    changes, not when their new bytes arrive last: a reader that trusts the marker alone (a dataset streaming from
    the URL) never meets a mix of an earlier version and this one. A marker confirmed already (the same cache,
    a damaged object repaired) stays."""
    for remote, rel in todo:
        if rel.rsplit("/", 1)[-1] == COMPLETE_MARKER:
            remote.delete(rel)


def _record_copies(attempts: dict[Job, CopyAttempt], reports: dict[str, DestinationReport]) -> None:
    for (remote, rel), attempt in attempts.items():
        report = reports[remote.url]
        if attempt.problem is None:
            report.copied[rel] = attempt.source
            del report.uploaded[rel]
        else:
            report.uploaded[rel] += f"; not copied from {attempt.source} there: {attempt.problem}"


def _upload_all(jobs: list[tuple[Remote, str]], cache: VerifiedCache, options: PublishOptions,
                reports: dict[str, DestinationReport], sent: Callable[[int], None]) -> None:
    def upload(job: tuple[Remote, str]) -> None:
        remote, rel = job
        digest = cache.digests[rel]
        fault_point("publish")  # test-only: a kill between two objects
        remote.upload(rel, cache.root / rel, digest, sent)
        if options.on_event:
            options.on_event(TransferEvent(remote.url, rel, "uploaded", digest.size, reports[remote.url].uploaded[rel]))

    run_parallel(upload, jobs, options.workers)


def _confirm(remotes: list[Remote], rels: list[str], cache: VerifiedCache, options: PublishOptions,
             reports: dict[str, DestinationReport], confirmed: Callable[[int], None]) -> None:
    """Check `rels` again everywhere; read back only what this run uploaded (the rest, copies included, was just
    checked that deep)."""
    jobs = [(remote, rel) for remote in remotes for rel in rels]

    def confirm(job: tuple[Remote, str]) -> str | None:
        remote, rel = job
        deep = rel in reports[remote.url].uploaded and remote.reads_back(options.verify_remote)
        reason = remote.problem(rel, cache.digests[rel], deep)
        confirmed(cache.digests[rel].size)
        if reason is None and options.on_event:
            options.on_event(TransferEvent(remote.url, rel, "confirmed", cache.digests[rel].size))
        return reason

    reasons = run_parallel(confirm, jobs, options.workers)
    failed = [f"{remote.url}: {rel}: {reason}" for (remote, rel), reason in zip(jobs, reasons) if reason]
    if failed:
        raise CacheIntegrityError("objects not confirmed after upload; rerun publish:\n  " + "\n  ".join(failed))

