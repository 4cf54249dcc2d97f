"""What a publish or fetch moves: every file of a cache with its SHA-256, checked against SHA256SUMS.

Each file is hashed once and, in the same pass, in `part_size` slices: S3 stores a multipart object's
SHA-256 as the hash of its parts' hashes, so the slices let publish predict that value without rereading
a 40 GB shard.
"""

from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from ..cache.checksums import checksummed_files, read_sha256sums
from ..cache.layout import COMPLETE_MARKER, NOT_CHECKSUMMED, PUBLISHED_MARKER, SUMS, bucket_markers
from ..errors import CacheIntegrityError
from ..hashing import SumProblem
from ..progress import Progress, start_step, uncounted
from .pool import run_parallel

_READ = 1 << 22


@dataclass(frozen=True)
class FileDigest:
    """Size, hex SHA-256 and the raw SHA-256 of each `part_size` slice (one part when size <= part_size)."""

    size: int
    sha256: str
    part_size: int
    part_digests: tuple[bytes, ...]

    @property
    def multipart(self) -> bool:
        return len(self.part_digests) > 1

    def server_checksum(self) -> str:
        """The base64 SHA-256 an S3 server reports: of the bytes, or of the part hashes for a multipart object."""
        if not self.multipart:
            return base64.b64encode(bytes.fromhex(self.sha256)).decode("ascii")
        composite = hashlib.sha256(b"".join(self.part_digests)).digest()
        return base64.b64encode(composite).decode("ascii")


def hash_stream(handle: BinaryIO, part_size: int, read: Callable[[int], None] = uncounted) -> FileDigest:
    """The digest of what `handle` holds; read(n) after each piece of n bytes."""
    whole = hashlib.sha256()
    parts: list[bytes] = []
    size = 0
    while True:
        part = hashlib.sha256()
        left = part_size
        while left:
            piece = handle.read(min(_READ, left))
            if not piece:
                break
            whole.update(piece)
            part.update(piece)
            left -= len(piece)
            read(len(piece))
        taken = part_size - left
        size += taken
        if taken or not parts:
            parts.append(part.digest())
        if left:
            break
    return FileDigest(size=size, sha256=whole.hexdigest(), part_size=part_size, part_digests=tuple(parts))


def hash_file(path: Path, part_size: int, read: Callable[[int], None] = uncounted) -> FileDigest:
    with open(path, "rb") as handle:
        return hash_stream(handle, part_size, read)


def hash_bytes(data: bytes, part_size: int) -> FileDigest:
    return hash_stream(io.BytesIO(data), part_size)


@dataclass(frozen=True)
class VerifiedCache:
    """A cache whose files all match SHA256SUMS; `digests` covers every file to publish, keyed by relative path."""

    root: Path
    digests: dict[str, FileDigest]

    @property
    def total_bytes(self) -> int:
        return sum(digest.size for digest in self.digests.values())


def sum_problems(root: Path, part_size: int, workers: int,
                 progress: Progress | None = None
                 ) -> tuple[dict[str, FileDigest], list[SumProblem]]:
    """Hash every checksummed file in parallel; report what disagrees with SHA256SUMS (as `sha256sum -c` would,
    plus files present but not listed). progress("hash", bytes) returns the function advanced by bytes read."""
    root = Path(root)
    if not (root / SUMS).is_file():
        return {}, [SumProblem(None, f"{SUMS} is missing; the cache was not committed")]
    listed, unparsable = read_sha256sums(root)
    problems = [SumProblem(None, line) for line in unparsable]
    present = set(checksummed_files(root))
    problems += [SumProblem(rel, f"listed in {SUMS} but missing") for rel in sorted(set(listed) - present)]
    problems += [SumProblem(rel, f"present but not listed in {SUMS}") for rel in sorted(present - set(listed))]
    to_hash = sorted(set(listed) & present)
    read = start_step(progress, "hash", sum((root / rel).stat().st_size for rel in to_hash))
    hashed = run_parallel(lambda rel: hash_file(root / rel, part_size, read), to_hash, workers)
    digests = dict(zip(to_hash, hashed))
    problems += [
        SumProblem(rel, f"sha256 {digests[rel].sha256} differs from {SUMS} ({listed[rel]})")
        for rel in to_hash
        if digests[rel].sha256 != listed[rel]
    ]
    return digests, problems


def load_verified_cache(root: Path, part_size: int, workers: int,
                        progress: Progress | None = None) -> VerifiedCache:
    """Refuse a cache that is not built (`_CACHE_COMPLETE`) or fails its SHA256SUMS check; else hash it for upload
    (`progress` as in sum_problems)."""
    root = Path(root)
    if not (root / COMPLETE_MARKER).is_file():
        raise CacheIntegrityError(
            f"{root}: no {COMPLETE_MARKER}, so the cache is not built and verified; finish `latentforge build` first"
        )
    digests, problems = sum_problems(root, part_size, workers, progress)
    if problems:
        listing = "\n  ".join(str(problem) for problem in problems)
        raise CacheIntegrityError(f"{root}: SHA256SUMS check failed; rebuild or repair before publishing:\n  {listing}")
    for marker in sorted(NOT_CHECKSUMMED - {PUBLISHED_MARKER}) + bucket_markers(list(digests)):
        digests[marker] = hash_file(root / marker, part_size)
    return VerifiedCache(root=root, digests=dict(sorted(digests.items())))
