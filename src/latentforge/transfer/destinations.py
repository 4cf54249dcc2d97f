"""A publish or fetch address: a store URL with its fsspec options, and the store class its scheme picks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .s3 import S3Remote
from .stores import FsspecRemote, LocalDirRemote, Remote


def open_remote(url: str, storage_options: dict[str, Any], part_size: int, server_checksum: bool) -> Remote:
    """s3:// and s3a:// (AWS or any S3-compatible endpoint via `endpoint_url`), file:// or a plain path, else fsspec."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "file", url
    if scheme in ("s3", "s3a"):
        return S3Remote(url, storage_options, part_size, server_checksum)
    if scheme in ("file", "local"):
        if storage_options:
            raise ConfigError(f"{url}: storage options {sorted(storage_options)} mean nothing for a local directory")
        return LocalDirRemote(url, Path(rest))
    return FsspecRemote(url, storage_options)


@dataclass(frozen=True)
class Destination:
    """A store URL and the fsspec storage options for it (endpoint_url, key, secret, profile, ...)."""

    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TransferEvent:
    """Reported from worker threads as each object moves; an exception raised by the listener stops the transfer."""

    destination: str
    path: str
    # "uploaded", "copied" (within the store, from an earlier version's object with the same bytes), "confirmed",
    # "removed" (an earlier version's, by publish) or "downloaded"
    action: str
    size: int
    reason: str = ""  # why it moved, e.g. "missing at destination"; empty when confirmed
