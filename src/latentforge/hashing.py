"""SHA-256 of files and the cache's SHA256SUMS, in the format `sha256sum -c` reads."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import CacheIntegrityError
from .io import write_text_atomic

SUMS_NAME = "SHA256SUMS"
# Markers say something about the cache's state, not its content, and build/ holds run records (DESIGN §4).
NOT_CHECKSUMMED = frozenset({SUMS_NAME, "_CACHE_COMPLETE", "_SUCCESS"})
RUN_RECORDS_DIR = "build"
_CHUNK = 1 << 20


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB pieces so memory stays flat for 40 GB shards."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while piece := handle.read(_CHUNK):
            digest.update(piece)
    return digest.hexdigest()


def checksummed_files(root: Path) -> list[str]:
    """Relative POSIX paths of every file SHA256SUMS must cover, in codepoint order."""
    root = Path(root)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d != RUN_RECORDS_DIR]
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if rel not in NOT_CHECKSUMMED:
                found.append(rel)
    return sorted(found)


def write_sha256sums(root: Path) -> None:
    """Write ROOT/SHA256SUMS: "<hex>  <relpath>" per file, sorted by relative path."""
    root = Path(root)
    lines = []
    for rel in checksummed_files(root):
        # sha256sum escapes these characters; our names never contain them, so refuse instead of escaping.
        if "\\" in rel or "\n" in rel or "\r" in rel:
            raise CacheIntegrityError(f"{root / rel}: file name with a backslash or newline cannot be checksummed")
        lines.append(f"{sha256_file(root / rel)}  {rel}\n")
    write_text_atomic(root / SUMS_NAME, "".join(lines))


def read_sha256sums(root: Path) -> tuple[dict[str, str], list[str]]:
    """Parse ROOT/SHA256SUMS into {relpath: hex}; the second value lists lines that do not parse."""
    listed: dict[str, str] = {}
    problems: list[str] = []
    text = (Path(root) / SUMS_NAME).read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), start=1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or not rel:
            problems.append(f"{SUMS_NAME} line {number}: not '<64 hex>  <path>': {line[:120]!r}")
        elif rel in listed:
            problems.append(f"{SUMS_NAME} line {number}: {rel} is listed twice")
        else:
            listed[rel] = digest
    return listed, problems


@dataclass(frozen=True)
class SumProblem:
    """One disagreement between SHA256SUMS and the files; `path` is None when no single file is at fault."""

    path: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def find_sum_problems(root: Path) -> list[SumProblem]:
    """Unparsable lines, wrong hashes, files listed but missing, files present but not listed."""
    root = Path(root)
    if not (root / SUMS_NAME).is_file():
        return [SumProblem(None, f"{SUMS_NAME} is missing; the cache was not committed")]
    listed, unparsable = read_sha256sums(root)
    problems = [SumProblem(None, line) for line in unparsable]
    present = set(checksummed_files(root))
    for rel, digest in listed.items():
        if rel not in present:
            problems.append(SumProblem(rel, f"listed in {SUMS_NAME} but missing"))
        elif sha256_file(root / rel) != digest:
            problems.append(SumProblem(rel, f"sha256 differs from {SUMS_NAME}"))
    for rel in sorted(present - set(listed)):
        problems.append(SumProblem(rel, f"present but not listed in {SUMS_NAME}"))
    return problems


def check_sha256sums(root: Path) -> list[str]:
    """Every problem with ROOT/SHA256SUMS as text; empty when every file matches and none is unlisted."""
    return [str(problem) for problem in find_sum_problems(root)]
