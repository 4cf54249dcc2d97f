"""SHA-256 of files and the `sha256sum` text format (`<64 hex>  <relative path>` per line).

Which files a cache's SHA256SUMS covers is the cache format's business (cache/checksums.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

_CHUNK = 1 << 20
_REMEMBERED: dict[tuple[str, int, int, int], str] = {}


def sha256_file(path: str | Path, read: Callable[[int], None] | None = None) -> str:
    """Hex SHA-256 of a file, read in 1 MiB pieces so memory stays flat for 40 GB shards; read(n) after each
    piece of n bytes (for progress)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while piece := handle.read(_CHUNK):
            digest.update(piece)
            if read is not None:
                read(len(piece))
    return digest.hexdigest()


def remembered_sha256(path: Path) -> str:
    """sha256_file of a model file, remembered per (path, size, mtime, inode): the pre-flight and each load in one
    process hash it once."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if key not in _REMEMBERED:
        _REMEMBERED[key] = sha256_file(path)
    return _REMEMBERED[key]


def format_sums(digests: Iterable[tuple[str, str]]) -> str:
    """`sha256sum` lines for (hex digest, relative path) pairs, in the order given.

    sha256sum escapes backslashes and newlines in names; callers never produce such names, so they are refused
    (ValueError) instead of escaped."""
    lines = []
    for digest, rel in digests:
        if "\\" in rel or "\n" in rel or "\r" in rel:
            raise ValueError(f"{rel!r}: a file name with a backslash or newline cannot be checksummed")
        lines.append(f"{digest}  {rel}\n")
    return "".join(lines)


def parse_sums(text: str, name: str) -> tuple[dict[str, str], list[str]]:
    """{relative path: hex} of a `sha256sum` file's text; the second value lists lines that do not parse."""
    listed: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or not rel:
            problems.append(f"{name} line {number}: not '<64 hex>  <path>': {line[:120]!r}")
        elif rel in listed:
            problems.append(f"{name} line {number}: {rel} is listed twice")
        else:
            listed[rel] = digest
    return listed, problems


@dataclass(frozen=True)
class SumProblem:
    """One disagreement between a sums file and the files; `path` is None when no single file is at fault."""

    path: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def compare_sums(listed: dict[str, str], present: set[str], name: str,
                 digest_of: Callable[[str], str]) -> list[SumProblem]:
    """Files listed but missing, listed with another hash, and present but not listed (by relative path)."""
    problems = []
    for rel, digest in listed.items():
        if rel not in present:
            problems.append(SumProblem(rel, f"listed in {name} but missing"))
        elif digest_of(rel) != digest:
            problems.append(SumProblem(rel, f"sha256 differs from {name}"))
    for rel in sorted(present - set(listed)):
        problems.append(SumProblem(rel, f"present but not listed in {name}"))
    return problems
