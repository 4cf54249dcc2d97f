"""What a destination holds before publish touches it: a cache of another tokenizer (refused), the earlier version
of this cache that a republish replaces, and anything else this cache does not list (refused, never deleted).

The earlier version is what the destination's own listings name: its SHA256SUMS and, in a bucketed root, each
bucket's. They are read before anything there is touched, and they stay until the earlier version's objects are
gone (publish uploads the new listings after the removals), so a rerun after a kill recognises the rest. The
digests they give let publish copy an earlier object that holds a new one's bytes (store_copies.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..cache.layout import (
    BUCKET_INDEX,
    BUCKETS_DIR,
    CACHE_CONFIG,
    COMPLETE_MARKER,
    PUBLISHED_MARKER,
    SUMS,
    bucket_markers,
)
from ..cache.ownership import is_own_record
from ..cache.tokenizer_identity import identity_differences, tokenizer_identity
from ..errors import CacheIntegrityError, ConfigError
from ..hashing import parse_sums
from ..testing.fault_points import fault_point
from .destinations import TransferEvent
from .digests import VerifiedCache
from .pool import run_parallel
from .stores import Remote

REMOVED = "of the earlier version published there, not part of this cache"
_SHOWN = 10  # foreign names quoted in a refusal


def _own_file(rel: str, name: str) -> bool:
    """Is `rel` the cache's `name`: at the root, or one bucket's (buckets/<bucket>/name)?"""
    parts = rel.split("/")
    return parts == [name] or (len(parts) == 3 and parts[0] == BUCKETS_DIR and parts[2] == name)


def _read(remote: Remote, rel: str) -> bytes:
    with remote.open_read(rel) as handle:
        return handle.read()


def _tokenizer(text: str | bytes) -> dict[str, Any] | None:
    """The tokenizer identity a cache_config.json records; None for a damaged copy, which publish replaces like any
    object (UnicodeDecodeError is a ValueError)."""
    try:
        config = json.loads(text)
    except ValueError:
        return None
    return tokenizer_identity(config.get("tokenizer") or {}) if isinstance(config, dict) else None


def refuse_other_tokenizer(remote: Remote, files: Iterable[str], cache: VerifiedCache) -> None:
    """A remote cache of another tokenizer or checkpoint is never overwritten file by file (a reader in between
    would see shards of two functions): ConfigError, before anything there is touched. `files`: what the remote
    holds; a bucketed root is checked by its buckets' cache_config.json."""
    local = [rel for rel in cache.digests if _own_file(rel, CACHE_CONFIG)]
    ours = _tokenizer((cache.root / local[0]).read_bytes()) if local else None
    for rel in (rel for rel in files if _own_file(rel, CACHE_CONFIG)):
        theirs = _tokenizer(_read(remote, rel))
        where = remote.url if rel == CACHE_CONFIG else f"{remote.url}/{rel}"
        differences = identity_differences(theirs, ours, where, str(cache.root)) if theirs and ours else []
        if differences:
            raise ConfigError(f"{where} holds a cache encoded by another tokenizer; refusing to publish over it:\n  "
                              + "\n  ".join(differences)
                              + "\npublish to another prefix, or delete the remote cache first")


@dataclass(frozen=True)
class EarlierVersion:
    """What the destination's listings name: `objects`, every path (the listings and the listed buckets' markers
    included), and `digests`, the hex SHA-256 they give each listed object: what it should hold, not what it
    does."""

    objects: frozenset[str] = frozenset()
    digests: dict[str, str] = field(default_factory=dict)


def earlier_version(remote: Remote, files: list[str]) -> EarlierVersion:
    """The earlier version named by the destination's listings. None unless the destination holds latentforge's
    own cache_config.json or buckets.json: a folder of the user's with a SHA256SUMS of its own is not a cache, and
    its files are never taken for one's."""
    if not any(is_own_record(_read(remote, name), name) for name in (CACHE_CONFIG, BUCKET_INDEX) if name in files):
        return EarlierVersion()
    listings = [rel for rel in files if _own_file(rel, SUMS)]
    digests: dict[str, str] = {}
    for listing in listings:
        try:
            listed, _ = parse_sums(_read(remote, listing).decode("utf-8"), listing)
        except UnicodeDecodeError:
            continue  # a damaged listing names nothing
        digests.update((listing[: -len(SUMS)] + rel, sha256) for rel, sha256 in listed.items())
    named = set(listings).union(digests)
    return EarlierVersion(frozenset(named.union(bucket_markers(sorted(named)))), digests)


def earlier_objects(remote: Remote, cache: VerifiedCache, earlier: EarlierVersion) -> list[str]:
    """What a republish removes at `remote`: the earlier version's objects that this cache does not list. Anything
    else there that this cache does not list is refused (CacheIntegrityError), and never deleted."""
    stale = [rel for rel in remote.list_files() if rel not in cache.digests and rel != PUBLISHED_MARKER]
    foreign = [rel for rel in stale if rel not in earlier.objects]
    if foreign:
        shown = ", ".join(foreign[:_SHOWN]) + (f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else "")
        raise CacheIntegrityError(
            f"{remote.url} holds files that are not part of this cache, nor of an earlier version of it published "
            f"there ({shown}); publish into an empty prefix or remove them"
        )
    return stale


def remove_earlier_objects(remote: Remote, stale: list[str], workers: int,
                           on_event: Callable[[TransferEvent], None] | None) -> None:
    """Remove `stale`: markers first (nothing may vouch for what goes), listings last (until they go, a rerun
    after a kill still recognises what is left)."""

    def remove(rel: str) -> None:
        size = remote.size(rel) or 0
        fault_point("publish")  # test-only: a kill between two removals
        remote.delete(rel)
        if on_event:
            on_event(TransferEvent(remote.url, rel, "removed", size, REMOVED))

    markers = [rel for rel in stale if _own_file(rel, COMPLETE_MARKER)]
    listings = [rel for rel in stale if _own_file(rel, SUMS)]
    content = [rel for rel in stale if rel not in markers and rel not in listings]
    for batch in (markers, content, listings):
        run_parallel(remove, batch, workers)
