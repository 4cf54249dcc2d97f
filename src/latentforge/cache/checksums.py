"""A cache's SHA256SUMS: every file under the root except itself, the markers and build/, sorted by relative
path, in the format `sha256sum -c` reads."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import CacheIntegrityError
from ..hashing import SumProblem, compare_sums, format_sums, parse_sums, sha256_file
from ..io import write_text_atomic
from ..progress import Progress, start_step
from .layout import BUCKETS_DIR, COMPLETE_MARKER, NOT_CHECKSUMMED, PUBLISHED_MARKER, RUN_RECORDS_DIR, SUMS


def _is_bucket_root(rel_dir: Path) -> bool:
    return len(rel_dir.parts) == 2 and rel_dir.parts[0] == BUCKETS_DIR


def checksummed_files(root: Path) -> list[str]:
    """Relative POSIX paths of every file SHA256SUMS must cover, in codepoint order. In a bucketed root that is
    every bucket's files too, their SHA256SUMS included; never a build/ folder or a completion marker."""
    root = Path(root)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        in_bucket_root = _is_bucket_root(rel_dir)
        if rel_dir == Path(".") or in_bucket_root:
            dirnames[:] = [d for d in dirnames if d != RUN_RECORDS_DIR]
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if rel in NOT_CHECKSUMMED or (in_bucket_root and name in (COMPLETE_MARKER, PUBLISHED_MARKER)):
                continue
            found.append(rel)
    return sorted(found)


def write_sha256sums(root: Path, known: Mapping[str, str] | None = None) -> None:
    """Write ROOT/SHA256SUMS over checksummed_files(root); `known` gives the SHA-256 of files that need not be read
    (shards an earlier verified commit wrote, unchanged since)."""
    root = Path(root)
    known = known or {}
    try:
        text = format_sums((known.get(rel) or sha256_file(root / rel), rel) for rel in checksummed_files(root))
    except ValueError as error:
        raise CacheIntegrityError(f"{root}: {error}") from None
    write_text_atomic(root / SUMS, text)


def read_sha256sums(root: Path) -> tuple[dict[str, str], list[str]]:
    """{relative path: hex} of ROOT/SHA256SUMS, and the lines that do not parse."""
    return parse_sums((Path(root) / SUMS).read_text(encoding="utf-8"), SUMS)


def find_sum_problems(root: Path, progress: Progress | None = None,
                      trusted: Mapping[str, str] | None = None) -> list[SumProblem]:
    """Unparsable lines, wrong hashes, files listed but missing, files present but not listed. `progress` gets
    a "sha256" step counted in bytes. `trusted`: {path: SHA-256} taken as the files' without reading them."""
    trusted = trusted or {}
    root = Path(root)
    if not (root / SUMS).is_file():
        return [SumProblem(None, f"{SUMS} is missing; the cache was not committed")]
    listed, unparsable = read_sha256sums(root)
    present = set(checksummed_files(root))
    read = start_step(progress, "sha256", sum((root / rel).stat().st_size for rel in present & set(listed)
                                              if rel not in trusted), unit="bytes")
    problems = [SumProblem(None, line) for line in unparsable]
    return problems + compare_sums(listed, present, SUMS, lambda rel: trusted.get(rel) or sha256_file(root / rel, read))


def write_bucketed_sha256sums(root: Path) -> None:
    """ROOT/SHA256SUMS of a bucketed root. A bucket's files take their hashes from the bucket's own SHA256SUMS,
    which its commit verified, so the root's commit reads no shard again; the root's own files and each bucket's
    SHA256SUMS are hashed here."""
    root = Path(root)
    listed: dict[str, dict[str, str]] = {}
    lines: list[tuple[str, str]] = []
    for rel in checksummed_files(root):
        parts = rel.split("/")
        if parts[0] != BUCKETS_DIR or len(parts) < 3 or parts[2:] == [SUMS]:
            lines.append((sha256_file(root / rel), rel))
            continue
        bucket_rel = "/".join(parts[:2])
        if bucket_rel not in listed:
            listed[bucket_rel] = read_sha256sums(root / bucket_rel)[0]
        inner = "/".join(parts[2:])
        if inner not in listed[bucket_rel]:
            raise CacheIntegrityError(f"{root / rel} is not listed in {bucket_rel}/{SUMS}; rerun the build")
        lines.append((listed[bucket_rel][inner], rel))
    try:
        text = format_sums(lines)
    except ValueError as error:
        raise CacheIntegrityError(f"{root}: {error}") from None
    write_text_atomic(root / SUMS, text)
