"""The `_SUCCESS` that publish writes last: what it vouches for, and how fetch reads that claim back.

The marker records the SHA-256 of the SHA256SUMS it was published with, so a fetch can tell a SHA256SUMS that
was replaced afterwards (together with the shards it lists) from the one publish confirmed.
"""

from __future__ import annotations

import json
import re

from ..cache.layout import PUBLISHED_MARKER, SUMS
from ..errors import CacheIntegrityError
from ..io import canonical_json
from .digests import VerifiedCache

FORMAT = "latentforge-publish"
SUMS_DIGEST_KEY = "sha256sums_sha256"
_HEX_SHA256 = re.compile(r"[0-9a-f]{64}")


def success_marker(cache: VerifiedCache) -> bytes:
    summary = {
        "format": FORMAT,
        "objects": len(cache.digests),
        "bytes": cache.total_bytes,
        SUMS_DIGEST_KEY: cache.digests[SUMS].sha256,
    }
    return (canonical_json(summary) + "\n").encode("utf-8")


def sums_digest_claimed(marker: bytes, where: str) -> str:
    """The SHA256SUMS digest a `_SUCCESS` vouches for; a marker that records none proves nothing and is refused."""
    try:
        claimed = json.loads(marker.decode("utf-8")).get(SUMS_DIGEST_KEY)
    except (ValueError, AttributeError):  # not JSON, not UTF-8, or not an object
        claimed = None
    if not isinstance(claimed, str) or not _HEX_SHA256.fullmatch(claimed):
        raise CacheIntegrityError(
            f"{where}/{PUBLISHED_MARKER} records no {SUMS_DIGEST_KEY}, so it vouches for no {SUMS}; publish the "
            "cache again from a trusted copy"
        )
    return claimed
