"""Reading cache rows into batch tensors, with the shard handles of one process.

In a DataLoader worker, plain rows (one single-sample chunk, no filters, native byte order: what
docs/cache-format.md prescribes) are copied by the kernel from the shard's page cache into a memfd with
sendfile, and the batch tensor maps that memfd, which the worker hands to the main process as it is. Without
this, every batch is read into fresh shared memory that must first be faulted in and zero-filled page by page.
Everything else (the main process, other layouts) is read through h5py.

A reader keeps at most `max_open` shards open (an h5py handle and a raw descriptor each), the least recently read
closed first: a cache of 10 million rows has thousands of shards, and every DataLoader worker has its own reader.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Callable

import h5py
import numpy as np
import torch
from torch.utils.data import get_worker_info

from ...cache.hdf5_files import FIX, open_h5, reading
from ...cache.text_rows import restore_row
from ...errors import CacheIntegrityError, DamagedFile

# Private torch API (what torch.multiprocessing uses to rebuild a shared storage from an fd); when it is absent
# every row takes the h5py path.
_SHARED_FROM_FD = getattr(torch.UntypedStorage, "_new_shared_fd_cpu", None)
_MEMFD = getattr(os, "memfd_create", None)

MAX_OPEN_SHARDS = 64
Location = tuple[int, int]  # (shard number, row in the shard)
Read = tuple[int, int, int]  # (stored start, stored end, start in the output) along the row's first axis


class ShardReader:
    """The open shards of one process: h5py handles for metadata and raw file descriptors for the bytes; at most
    `max_open` shards between two reads (one read may open more: its descriptors stay valid until it returns).
    `later`: where a shard is once `root` no longer holds it (a cache read from a swap's folder, since retired)."""

    def __init__(self, root: Path, shard_paths: tuple[str, ...], check: Callable[[h5py.File, Path], None],
                 max_open: int = MAX_OPEN_SHARDS, later: Path | None = None):
        if max_open < 1:
            raise ValueError(f"max_open={max_open}: keep at least one shard open")
        self.root = root
        self.shard_paths = shard_paths
        self.check = check
        self.max_open = max_open
        self.later = later
        self._paths: dict[int, Path] = {}  # where each open shard was found
        self._files: OrderedDict[int, h5py.File] = OrderedDict()  # least recently read first
        self._fds: dict[int, int] = {}
        self._plain: dict[tuple[int, str], bool] = {}

    def _close_least_recent(self) -> None:
        """Down to max_open shards, before a read (never during one: its memfd batch still reads descriptors)."""
        while len(self._files) > self.max_open:
            shard, handle = self._files.popitem(last=False)
            handle.close()
            del self._paths[shard]
            fd = self._fds.pop(shard, None)
            if fd is not None:
                os.close(fd)

    def file(self, shard: int) -> h5py.File:
        handle = self._files.get(shard)
        if handle is not None:
            self._files.move_to_end(shard)
        else:
            path = self.root / self.shard_paths[shard]
            # Rows are whole single-sample chunks read once each: HDF5's chunk cache would only add a copy.
            try:
                handle = open_h5(path, rdcc_nbytes=0)
            except DamagedFile:
                if self.later is None or not (self.later / self.shard_paths[shard]).is_file():
                    raise
                path = self.later / self.shard_paths[shard]
                handle = open_h5(path, rdcc_nbytes=0)
            with reading(path):
                self.check(handle, path)
            self._files[shard] = handle
            self._paths[shard] = path
        return handle

    def gather(self, locations: list[Location], name: str, shape: tuple[int, ...], reads: list[Read]) -> torch.Tensor:
        """[len(locations), *shape] tensor of dataset `name`: slot i holds the `reads` of row locations[i]."""
        self._close_least_recent()
        with reading(self.root / self.shard_paths[locations[0][0]]):
            dtype = self.file(locations[0][0])[name].dtype
        # Only workers need shared memory; in the main process a reused heap buffer is cheaper than a memfd.
        if get_worker_info() is not None and _SHARED_FROM_FD is not None and _MEMFD is not None:
            sources = [self._chunk(shard, name, row) for shard, row in locations]
            if all(source is not None for source in sources):
                return _memfd_batch(sources, shape, reads, dtype)  # type: ignore[arg-type]
        out = _buffer((len(locations), *shape), dtype)
        target = out.numpy()
        for slot, (shard, row) in enumerate(locations):
            with reading(self.root / self.shard_paths[shard]):
                dataset = self.file(shard)[name]
                for start, end, at in reads:
                    dataset.read_direct(target, np.s_[row, start:end], np.s_[slot, at : at + end - start])
        return out

    def gather_trimmed(self, locations: list[Location], name: str, length_name: str, shape: tuple[int, int],
                       dtype: np.dtype | str) -> torch.Tensor:
        """[len(locations), max_length, D] of a trimmed text dataset: each row's tokens, zero past its length."""
        self._close_least_recent()
        out = _buffer((len(locations), *shape), dtype)
        target = out.numpy()
        for slot, (shard, row) in enumerate(locations):
            with reading(self.root / self.shard_paths[shard]):
                handle = self.file(shard)
                length = int(handle[length_name][row])
                where = f"{handle.filename}:{name}[{row}]"
                target[slot] = restore_row(handle[name][row], length, shape[0], shape[1], where)
        return out

    def _chunk(self, shard: int, name: str, row: int) -> tuple[int, int] | None:
        """(file descriptor, byte offset) of a plain row's chunk, else None."""
        with reading(self.root / self.shard_paths[shard]):
            return self._plain_chunk(shard, name, row)

    def _plain_chunk(self, shard: int, name: str, row: int) -> tuple[int, int] | None:
        dataset = self.file(shard)[name]
        plain = self._plain.get((shard, name))
        if plain is None:
            plain = (
                dataset.chunks == (1, *dataset.shape[1:])
                and dataset.id.get_create_plist().get_nfilters() == 0
                and dataset.dtype.isnative
            )
            self._plain[(shard, name)] = plain
        if not plain:
            return None
        info = dataset.id.get_chunk_info_by_coord((row,) + (0,) * (dataset.ndim - 1))
        if info.byte_offset is None:  # never written: h5py returns the fill value
            return None
        fd = self._fds.get(shard)
        if fd is None:
            fd = self._fds[shard] = self._open_fd(shard)
        return fd, int(info.byte_offset)

    def _open_fd(self, shard: int) -> int:
        try:
            return os.open(self._paths[shard], os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            if self.later is None:
                raise
            return os.open(self.later / self.shard_paths[shard], os.O_RDONLY | os.O_CLOEXEC)

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        for fd in self._fds.values():
            os.close(fd)
        self._files, self._fds, self._paths = OrderedDict(), {}, {}


def _memfd_batch(
    sources: list[tuple[int, int]], shape: tuple[int, ...], reads: list[Read], dtype: np.dtype
) -> torch.Tensor:
    plane = int(np.prod(shape[1:])) * dtype.itemsize
    row_bytes = shape[0] * plane
    total = len(sources) * row_bytes
    fd = _MEMFD("latentforge-batch", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, total)
        for slot, (source, offset) in enumerate(sources):
            for start, end, at in reads:
                os.lseek(fd, slot * row_bytes + at * plane, os.SEEK_SET)
                _sendfile_all(fd, source, offset + start * plane, (end - start) * plane)
        storage = _SHARED_FROM_FD(fd, total)  # maps a dup of fd, as torch.multiprocessing does
    finally:
        os.close(fd)
    return torch.empty(0, dtype=_torch_dtype(dtype)).set_(storage, 0, (len(sources), *shape))


def _sendfile_all(out_fd: int, in_fd: int, offset: int, count: int) -> None:
    while count:
        sent = os.sendfile(out_fd, in_fd, offset, count)
        if sent == 0:
            raise CacheIntegrityError(f"shard ends before byte {offset + count}: the file is truncated; {FIX}")
        offset += sent
        count -= sent


def _torch_dtype(dtype: np.dtype | str) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


def _buffer(shape: tuple[int, ...], dtype: np.dtype | str) -> torch.Tensor:
    """An uninitialised tensor; in a DataLoader worker, backed by shared memory (as default_collate does)."""
    torch_dtype = _torch_dtype(dtype)
    if get_worker_info() is None:
        return torch.empty(shape, dtype=torch_dtype)
    storage = torch.UntypedStorage._new_shared(int(np.prod(shape)) * torch_dtype.itemsize)
    return torch.empty(0, dtype=torch_dtype).set_(storage, 0, shape)
