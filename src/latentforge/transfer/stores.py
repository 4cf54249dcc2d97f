"""Where a cache is published to or fetched from: the store interface and the local-folder and generic fsspec
stores, all addressed by paths relative to the cache root (S3 has its own module, s3.py)."""

from __future__ import annotations

import io
import os
import shutil
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, BinaryIO, Callable

from ..cache.layout import TMP_LEFTOVER
from ..io import atomic_path
from ..storage import Storage
from .digests import FileDigest, hash_stream, uncounted

_COPY_BLOCK = 1 << 22
MISSING = "missing at destination"


def size_differs(size: int, digest: FileDigest) -> str:
    return f"size differs ({size} bytes there, {digest.size} expected)"


def open_source(source: Path | bytes) -> BinaryIO:
    return io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")


def copy_counted(reader: BinaryIO, writer: BinaryIO, moved: Callable[[int], None]) -> None:
    while block := reader.read(_COPY_BLOCK):
        writer.write(block)
        moved(len(block))


class Remote(ABC):
    """One destination. Objects appear whole or not at all; a path is a cache-relative POSIX path."""

    url: str
    # True when size plus stored checksums speak for an object's content; otherwise confirming it means
    # reading it back.
    stores_checksums: bool = False
    # True when the checksums the store keeps for a copy made within it (copy()) are computed from the copied bytes
    # rather than only written by the copier; otherwise confirming a copy means reading it back.
    checksums_copies: bool = False

    @abstractmethod
    def list_files(self) -> list[str]: ...

    @abstractmethod
    def size(self, rel: str) -> int | None: ...

    @abstractmethod
    def open_read(self, rel: str) -> BinaryIO: ...

    @abstractmethod
    def upload(self, rel: str, source: Path | bytes, digest: FileDigest,
               sent: Callable[[int], None] = uncounted) -> None:
        """Store `source` at `rel`; sent(n) as n more bytes have gone."""

    @abstractmethod
    def copy(self, source: str, rel: str, digest: FileDigest) -> None:
        """Store at `rel` what the store holds at `source`, within the store (nothing passes through this machine);
        `digest` is what both hold, so the copy carries what an upload of it would."""

    @abstractmethod
    def delete(self, rel: str) -> None: ...

    def reads_back(self, verify_remote: bool, copied: bool = False) -> bool:
        """Whether confirming an object means reading it back: when asked to, where the store keeps no checksums,
        and for a copy made within the store where its checksums do not speak for the copied bytes."""
        return verify_remote or not self.stores_checksums or (copied and not self.checksums_copies)

    def discard_partials(self) -> None:
        """Remove what an interrupted earlier run left half-written (nothing, where uploads are atomic)."""

    def problem(self, rel: str, digest: FileDigest, deep: bool) -> str | None:
        """Why the object at `rel` is not a confirmed copy of `digest`, or None. `deep` reads it back and hashes it."""
        size = self.size(rel)
        if size is None:
            return MISSING
        if size != digest.size:
            return size_differs(size, digest)
        return self.content_problem(rel, digest) if deep else None

    def content_problem(self, rel: str, digest: FileDigest) -> str | None:
        with self.open_read(rel) as handle:
            read_back = hash_stream(handle, digest.part_size)
        if read_back.sha256 != digest.sha256:
            return f"checksum differs (content sha256 {read_back.sha256}, expected {digest.sha256})"
        return None

    def download(self, rel: str, local: Path, received: Callable[[int], None] = uncounted) -> None:
        """Copy `rel` to `local` atomically; received(n) as n more bytes have arrived."""
        with self.open_read(rel) as source, atomic_path(local) as tmp, open(tmp, "wb") as target:
            copy_counted(source, target, received)


class LocalDirRemote(Remote):
    """file:// — a directory that receives the cache layout as is; confirmed by size and by hashing the copy."""

    def __init__(self, url: str, base: Path):
        self.url = url
        self.base = base

    def list_files(self) -> list[str]:
        if not self.base.is_dir():
            return []
        return sorted(
            (Path(dirpath) / name).relative_to(self.base).as_posix()
            for dirpath, _, filenames in os.walk(self.base)
            for name in filenames
        )

    def size(self, rel: str) -> int | None:
        path = self.base / rel
        return path.stat().st_size if path.is_file() else None

    def open_read(self, rel: str) -> BinaryIO:
        return open(self.base / rel, "rb")

    def upload(self, rel: str, source: Path | bytes, digest: FileDigest,
               sent: Callable[[int], None] = uncounted) -> None:
        with open_source(source) as reader, atomic_path(self.base / rel) as tmp, open(tmp, "wb") as writer:
            copy_counted(reader, writer, sent)

    def copy(self, source: str, rel: str, digest: FileDigest) -> None:
        with atomic_path(self.base / rel) as tmp:
            try:
                os.link(self.base / source, tmp)  # no bytes written: both names share the earlier file's data
            except OSError:  # a file system without hard links, or a folder mounted from another one
                tmp.unlink(missing_ok=True)
                shutil.copyfile(self.base / source, tmp)

    def delete(self, rel: str) -> None:
        path = self.base / rel
        path.unlink(missing_ok=True)
        # A folder left empty goes too (an earlier version's bucket), so the folder holds the cache's layout only.
        for folder in path.parents[: len(Path(rel).parts) - 1]:
            try:
                folder.rmdir()
            except OSError:  # not empty (or gone already)
                break

    def discard_partials(self) -> None:
        for rel in self.list_files():
            if TMP_LEFTOVER.match(Path(rel).name):  # what an interrupted copy leaves behind
                (self.base / rel).unlink()


class FsspecRemote(Remote):
    """Any other fsspec store (gs:// with gcsfs, memory://, ...): no checksum metadata, so confirming reads back."""

    def __init__(self, url: str, storage_options: dict[str, Any]):
        self.url = url
        self.storage = Storage(url, storage_options)

    def list_files(self) -> list[str]:
        return sorted(self.storage.list_files())

    def size(self, rel: str) -> int | None:
        return self.storage.size(rel)

    def open_read(self, rel: str) -> BinaryIO:
        return self.storage.open(rel)

    def upload(self, rel: str, source: Path | bytes, digest: FileDigest,
               sent: Callable[[int], None] = uncounted) -> None:
        if isinstance(source, bytes):
            self.storage.write(rel, source)
        else:
            self.storage.fs.put_file(str(source), self.storage.path(rel))
        sent(digest.size)  # fsspec stores differ in how they report progress: count the object whole

    def copy(self, source: str, rel: str, digest: FileDigest) -> None:
        self.storage.fs.copy(self.storage.path(source), self.storage.path(rel))

    def delete(self, rel: str) -> None:
        self.storage.delete(rel)
