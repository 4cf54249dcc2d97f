"""The WebDataset cache a local root holds, as the commit about to replace it reads it: whether each tar is still
what its commit wrote, whether the new manifest repeats a tar's lines, and the arrays of retired units
(staging/staged_units.py) read back from the tars that hold them. The counterpart of staging/committed_rows.py for
tar shards: an --extend, a commit resumed after a kill and one that mends a damaged cache find here the rows whose
staged units gave way once they were committed.

Trust: the root holds a complete cache (the local swap never leaves less), whose SHA256SUMS its commit confirmed.
A tar counts as its commit wrote it while it keeps the size and mtime recorded with its SHA-256 when it was swapped
in (TAR_STATS, in the build records), else when it hashes to its line. A changed tar is neither kept nor read: rows
that only it holds cannot be committed again. The manifest counts when it hashes to its line; one that does not (or
does not read) is made again from the tars, every one of them trusted first: each sample's KEY.json member is its
manifest line, as its commit wrote both, so the commit ends in the bytes the damage took.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import tarfile
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ...cache.layout import COMPLETE_MARKER, MANIFEST, SUMS, TAR_STATS, ShardSchema
from ...errors import CacheIntegrityError, DamagedFileWarning, one_line
from ...hashing import parse_sums, sha256_file
from ...io import canonical_json, write_text_atomic
from ...staging.staged_units import RowArrays, StagedRow
from .layout import LATENT, LENGTH, ROW, TEXT, npy_array, sample_key, stream_member, tar_shard_numbers

_FIX = "rebuild the cache with --overwrite"
_LINE_DIGEST = 16  # bytes of BLAKE2b kept per manifest line: the root's lines are compared, never held


def _line_digest(line: bytes) -> bytes:
    return hashlib.blake2b(line, digest_size=_LINE_DIGEST).digest()


class PublishedTars:
    """Opened on a local root before its commit writes anything; called with a retired unit's rows (gather_staged's
    `committed`), it gives that unit's arrays, each row read from its sample's members when asked for."""

    def __init__(self, root: Path, schema: ShardSchema, records: Path | None):
        self.root, self.schema = Path(root), schema
        self.shards: list[tuple[str, int, int]] = []  # (path, start, end) of the cache's tars, in order
        self._names: dict[tuple[int, int, int], str] = {}  # (k, start, end) -> path
        self._sums: dict[str, str] = {}
        self._lines = np.zeros((0, _LINE_DIGEST), np.uint8)
        self._stats = _read_stats(records)
        self._trusted: dict[str, bool] = {}
        self._kept: set[str] = set()  # tars the new cache keeps as they are: their rows are never read
        self._where: dict[int, tuple[str, int]] | None = None  # source_index -> (tar, dataset_index)
        self._tars: dict[str, tarfile.TarFile] = {}
        self._mended = False  # the manifest's lines are the tars' KEY.json members: the root's manifest is damaged
        self.problem = self._load()  # why the root's cache cannot give rows back; None when it can

    def _load(self) -> str | None:
        if not (self.root / COMPLETE_MARKER).is_file():
            return f"it holds no complete cache ({COMPLETE_MARKER} is missing)"
        try:
            self._sums, unparsable = parse_sums((self.root / SUMS).read_text(encoding="utf-8"), SUMS)
        except (OSError, UnicodeDecodeError) as error:
            return f"its records do not read ({one_line(error)})"
        if unparsable or MANIFEST not in self._sums:
            return f"its {SUMS} is damaged or does not list {MANIFEST}"
        numbered = sorted((numbers, rel) for rel in self._sums if (numbers := tar_shard_numbers(rel)) is not None)
        shards, end = [], 0
        for k, ((index, _, start, stop), rel) in enumerate(numbered):
            if index != k or start != end or stop <= start:
                return f"its tars do not follow each other ({rel})"
            shards.append((rel, start, stop))
            end = stop
        self.shards = shards
        lines, digest = bytearray(), hashlib.sha256()
        try:
            with open(self.root / MANIFEST, "rb") as handle:
                for line in handle:
                    digest.update(line)
                    lines += _line_digest(line.rstrip(b"\n"))
            damage = None if digest.hexdigest() == self._sums[MANIFEST] else f"it does not hash to its {SUMS} line"
        except OSError as error:
            damage = f"it does not read: {one_line(error)}"
        if damage is not None:
            return self._mend(damage)
        if end != len(lines) // _LINE_DIGEST:
            return f"its tars hold {end} samples, its {MANIFEST} {len(lines) // _LINE_DIGEST}"
        self._index(lines)
        return None

    def _mend(self, damage: str) -> str | None:
        """The manifest's lines made again from the tars' KEY.json members, each tar trusted first; why they cannot
        be, when a tar changed too."""
        lines = bytearray()
        for rel, start, end in self.shards:
            if not self._as_written(rel):
                return f"its {MANIFEST} is damaged ({damage}) and {rel} changed since its commit"
            try:
                for line in _tar_lines(self.root / rel, start, end):
                    lines += _line_digest(line)
            except (OSError, ValueError, tarfile.TarError) as error:
                return f"its {MANIFEST} is damaged ({damage}) and {rel} does not give its rows ({one_line(error)})"
        self._mended = True
        self._index(lines)
        warnings.warn(f"{self.root / MANIFEST} is damaged ({damage}); its rows are made again from the KEY.json "
                      "members of the tars", DamagedFileWarning, stacklevel=2)
        return None

    def _index(self, lines: bytearray) -> None:
        """Names and line digests of a cache whose manifest lines are known."""
        self._names = {(k, start, stop): rel for k, (rel, start, stop) in enumerate(self.shards)}
        self._lines = np.frombuffer(bytes(lines), np.uint8).reshape(-1, _LINE_DIGEST)

    def name(self, k: int, start: int, end: int) -> str | None:
        """The root's tar of shard k holding samples [start, end), if it has one."""
        return self._names.get((k, start, end))

    def same_lines(self, start: int, lines: Iterable[str]) -> bool:
        """Are these manifest lines, from dataset_index `start` on, the ones the root's manifest holds there?"""
        for index, line in enumerate(lines, start):
            if index >= len(self._lines) or _line_digest(line.encode("utf-8")) != self._lines[index].tobytes():
                return False
        return True

    def trusted(self, rel: str) -> str | None:
        """The tar's SHA-256 while it holds the bytes its commit wrote; None when it changed, is gone or is not the
        root's."""
        if self.problem is not None:
            return None
        return self._sums[rel] if self._as_written(rel) else None

    def _as_written(self, rel: str) -> bool:
        if rel not in self._trusted:
            self._trusted[rel] = rel in self._sums and self._unchanged(rel)
        return self._trusted[rel]

    def _unchanged(self, rel: str) -> bool:
        try:
            found = (self.root / rel).stat()
            if self._stats.get(rel) == [found.st_size, found.st_mtime_ns, self._sums[rel]]:
                return True
            return sha256_file(self.root / rel) == self._sums[rel]
        except OSError:
            return False

    def keep(self, rels: Iterable[str]) -> None:
        """The new cache keeps these tars as they are: rows are never looked for in them."""
        self._kept.update(rels)

    def __call__(self, rows: list[StagedRow]) -> tuple[RowArrays, RowArrays | None, RowArrays | None,
                                                        dict[str, RowArrays]]:
        if self.problem is not None:
            raise CacheIntegrityError(f"{self.root}: samples {[r.sample_id for r in rows[:3]]} were committed and "
                                      f"their staged units retired, but the cache there cannot give them back: "
                                      f"{self.problem}; {_FIX}")
        schema, count = self.schema, len(rows)
        latents = _Members(self, rows, LATENT, schema.latent_dtype or schema.storage_dtype,
                           (count, *schema.latent_shape), npy_array)
        conditioning: dict[str, RowArrays] = {
            stream.name: _Members(self, rows, stream_member(stream.name), stream.dtype, (count, *stream.shape),
                                  npy_array) for stream in schema.conditioning}
        if schema.text_prefix is None:
            return latents, None, None, conditioning
        text = _Members(self, rows, TEXT, schema.storage_dtype, (count, schema.max_length, schema.text_dim),
                        self._padded)
        lengths = _Members(self, rows, LENGTH, "uint16", (count,), lambda data: np.uint16(int(data)))
        return latents, text, lengths, conditioning

    def _padded(self, data: bytes) -> np.ndarray:
        """A stored text row ([length, D]) zero-padded to [max_length, D], as a staged unit holds it."""
        row = npy_array(data)
        padded = np.zeros((self.schema.max_length, self.schema.text_dim), np.dtype(self.schema.storage_dtype))
        padded[: len(row)] = row
        return padded

    def member(self, source_index: int, suffix: str) -> bytes:
        """One member of the committed sample `source_index`, from the tar that holds it."""
        place = self._place(source_index)
        if place is None:
            raise CacheIntegrityError(f"{self.root}: sample source_index={source_index} was committed and its staged "
                                      f"unit retired, but no tar there holds it; {_FIX}")
        rel, index = place
        if self.trusted(rel) is None:
            raise CacheIntegrityError(f"{self.root / rel} changed since its commit, and the staged units of its "
                                      f"samples were retired, so its rows cannot be committed again; {_FIX}")
        try:
            if rel not in self._tars:
                self._tars[rel] = tarfile.open(self.root / rel, "r:")
            extracted = self._tars[rel].extractfile(f"{sample_key(index)}.{suffix}")
            if extracted is None:
                raise KeyError(suffix)
            return extracted.read()
        except (OSError, KeyError, tarfile.TarError) as error:
            raise CacheIntegrityError(f"{self.root / rel}: sample {sample_key(index)} has no readable {suffix} "
                                      f"({one_line(error)}); {_FIX}") from error

    def _place(self, source_index: int) -> tuple[str, int] | None:
        """(tar, dataset_index) of a committed row, from the manifest lines of the tars not kept (read once)."""
        if self._where is None:
            self._where = {int(json.loads(line)["source_index"]): (rel, index)
                           for rel, index, line in self._lines_not_kept()}
        return self._where.get(source_index)

    def _lines_not_kept(self) -> Iterator[tuple[str, int, bytes]]:
        """(tar, dataset_index, manifest line) of each row of the tars not kept: from the manifest, or from the tars'
        KEY.json members where it was mended."""
        if self._mended:
            for rel, start, end in self.shards:
                if rel not in self._kept:
                    yield from ((rel, index, line) for index, line in enumerate(_tar_lines(self.root / rel, start,
                                                                                           end), start))
            return
        starts = [start for _, start, _ in self.shards]
        with open(self.root / MANIFEST, "rb") as handle:
            for index, line in enumerate(handle):
                rel = self.shards[bisect.bisect_right(starts, index) - 1][0]
                if rel not in self._kept:
                    yield rel, index, line

    def close(self) -> None:
        for tar in self._tars.values():
            tar.close()
        self._tars.clear()


def _tar_lines(path: Path, start: int, end: int) -> Iterator[bytes]:
    """The KEY.json member of each sample of the tar holding samples [start, end), in order: its manifest line."""
    expected = start
    with tarfile.open(path, "r:") as tar:
        for member in tar:
            key, _, suffix = member.name.partition(".")
            if suffix != ROW:
                continue
            extracted = tar.extractfile(member)
            if key != sample_key(expected) or expected >= end or extracted is None:
                raise ValueError(f"{member.name} is not the {ROW} member of sample {sample_key(expected)}")
            yield extracted.read()
            expected += 1
    if expected != end:
        raise ValueError(f"it holds {expected - start} {ROW} members for {end - start} samples")


class _Members:
    """One array of a retired unit's rows, sliced as a staged unit's dataset is: row by row, each decoded from its
    sample's member."""

    def __init__(self, tars: PublishedTars, rows: list[StagedRow], suffix: str, dtype: Any, shape: tuple[int, ...],
                 decode: Callable[[bytes], np.ndarray]):
        self._tars, self._rows, self._suffix, self._decode = tars, rows, suffix, decode
        self.dtype, self.shape = np.dtype(dtype), tuple(shape)

    def __getitem__(self, position: int) -> np.ndarray:
        return self._decode(self._tars.member(self._rows[position].source_index, self._suffix))


def record_tar_stats(records: Path | None, root: Path, digests: dict[str, str]) -> None:
    """Once a commit swapped its cache in: each tar's size, mtime and SHA-256 as it is at the root now, so the next
    commit trusts the tar unread while they hold."""
    if records is None:
        return
    stats = {}
    for rel in sorted(rel for rel in digests if tar_shard_numbers(rel) is not None):
        with contextlib.suppress(OSError):
            found = (Path(root) / rel).stat()
            stats[rel] = [found.st_size, found.st_mtime_ns, digests[rel]]
    Path(records).mkdir(parents=True, exist_ok=True)
    write_text_atomic(Path(records) / TAR_STATS, canonical_json(stats) + "\n")


def _read_stats(records: Path | None) -> dict[str, Any]:
    try:
        data = json.loads((Path(records) / TAR_STATS).read_text(encoding="utf-8")) if records is not None else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
