"""A republished object whose bytes an object of the earlier version at the same destination already holds (an
extended HDF5 cache's full old shards, renamed because their names hold the shard count) is made by a copy within
the store instead of an upload: S3 CopyObject or UploadPartCopy, fsspec's copy, a hard link in a local folder.

The earlier listing's digest names what that object should hold, not what it does: the object is confirmed against
it the way publish confirms any object (size and the store's checksums, or read back where it keeps none) before it
is copied, so a damaged earlier object is never copied into the new version; the new object is uploaded instead.
Each copy is confirmed against the new object's digest as an upload is (read back where the store's checksums of
a copy do not speak for its bytes) as soon as it is made; one that is not is uploaded over. Publish makes the copies
before it removes anything of the earlier version.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from ..progress import Progress, start_step
from ..testing.fault_points import fault_point
from .destinations import TransferEvent
from .digests import FileDigest, VerifiedCache
from .earlier_version import EarlierVersion
from .pool import run_parallel
from .stores import Remote

Job = tuple[Remote, str]  # an object to send: the destination and the path there


@dataclass(frozen=True)
class CopyAttempt:
    source: str  # the earlier object copied, or the last one that could not vouch for the bytes
    problem: str | None = None  # why the object was not copied from `source` (it is then uploaded); None: copied


def copy_from_earlier(jobs: list[Job], written: list[Job], earlier: dict[str, EarlierVersion], cache: VerifiedCache,
                      verify_remote: bool, workers: int, on_event: Callable[[TransferEvent], None] | None,
                      progress: Progress | None) -> dict[Job, CopyAttempt]:
    """Make each of `jobs` whose bytes an earlier object at its destination holds by a copy there, confirmed (step
    "copy", in bytes). Returns how it went for each job that had such an object; the rest, and those whose earlier
    object could not vouch for the bytes or whose copy was not confirmed, are left to upload. `written`: every
    object this publish sends, never a source, since it is about to change. `earlier`: each destination's earlier
    version, by URL."""
    changing = {(remote.url, rel) for remote, rel in written}
    by_digest: dict[tuple[str, str], list[str]] = defaultdict(list)
    for url, version in earlier.items():
        for source, sha256 in version.digests.items():
            if (url, source) not in changing:
                by_digest[url, sha256].append(source)
    sources = {job: by_digest[job[0].url, cache.digests[job[1]].sha256] for job in jobs}
    sources = {job: found for job, found in sources.items() if found}
    if not sources:
        return {}
    done = start_step(progress, "copy", sum(cache.digests[rel].size for _, rel in sources))

    def copy(job: Job) -> CopyAttempt:
        remote, rel = job
        digest = cache.digests[rel]
        attempt = _vouched(remote, sources[job], digest, remote.reads_back(verify_remote))
        if attempt.problem is None:
            fault_point("publish")  # test-only: a kill between two objects
            remote.copy(attempt.source, rel, digest)
            problem = remote.problem(rel, digest, remote.reads_back(verify_remote, copied=True))
            if problem:
                attempt = CopyAttempt(attempt.source, f"the copy was not confirmed ({problem})")
            elif on_event:
                on_event(TransferEvent(remote.url, rel, "copied", digest.size,
                                       f"the same bytes as {attempt.source} there, of the earlier version"))
        done(digest.size)
        return attempt

    jobs_with_sources = list(sources)
    return dict(zip(jobs_with_sources, run_parallel(copy, jobs_with_sources, workers)))


def _vouched(remote: Remote, sources: list[str], digest: FileDigest, deep: bool) -> CopyAttempt:
    """The first of `sources` confirmed to hold `digest`, or the last one's problem."""
    attempt = CopyAttempt(sources[0], "not checked")
    for source in sources:
        attempt = CopyAttempt(source, remote.problem(source, digest, deep))
        if attempt.problem is None:
            break
    return attempt
