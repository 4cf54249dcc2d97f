"""verify's checks of one tar of a WebDataset cache (sinks/webdataset/integrity.py), read once in stream mode while
its SHA-256 is taken: keys in dataset_index order, the members the cache promises, each `KEY.json` equal to its
manifest line, latent and text shapes, dtypes and finiteness, text lengths, conditioning streams; and the empty
prompt's tar."""

from __future__ import annotations

import hashlib
import json
import tarfile
from typing import Any, BinaryIO

import numpy as np

from ...cache.check_report import CheckRecorder
from ...cache.conditioning_streams import (
    CONDITIONING_CHECK,
    ConditioningStream,
    condition_frame_problem,
    stream_row_problem,
)
from ...cache.config_file import CacheConfig
from ...cache.layout import MANIFEST
from ...cache.rows import ManifestRow
from ...cache.token_ids import id_range_problem
from ...progress import Advance
from .layout import EMPTY_PROMPT_KEY, EMPTY_PROMPT_TAR, LATENT, LENGTH, ROW, TEXT, npy_array, sample_key, stream_member

_BLOCK = 1 << 22


class HashingReader:
    """A read-only stream that hashes what passes through it (tarfile reads a shard in stream mode)."""

    def __init__(self, raw: BinaryIO):
        self.raw, self.sha = raw, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.sha.update(data)
        return data

    def rest(self) -> str:
        while self.read(_BLOCK):
            pass
        return self.sha.hexdigest()


def _samples(reader: HashingReader) -> Any:
    """(key, {suffix: bytes}) of each sample of a tar, in stored order."""
    with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
        key, members = None, {}
        for member in tar:
            name_key, _, suffix = member.name.partition(".")
            if key is not None and name_key != key:
                yield key, members
                members = {}
            key = name_key
            extracted = tar.extractfile(member)
            members[suffix] = extracted.read() if extracted is not None else b""
        if key is not None:
            yield key, members


def check_tar(reader: HashingReader, rel: str, span: tuple[int, int], config: CacheConfig,
               manifest: list[bytes], rec: CheckRecorder, advance: Advance) -> None:
    start, end = span
    expected = {LATENT, ROW} | ({TEXT, LENGTH} if config.text is not None else set())
    expected |= {stream_member(stream.name) for stream in _streams(config)}
    index = start
    try:
        for key, members in _samples(reader):
            if key != sample_key(index) or index >= end:
                rec.fail("samples", f"{rel}: key {key!r} where {sample_key(index)!r} belongs", index)
                return
            if set(members) != expected:
                rec.fail("samples", f"{rel}: sample {key} has members {sorted(members)}, expected {sorted(expected)}",
                         index)
            else:
                _check_sample(members, index, config, manifest, rec)
            index += 1
            advance(1)
    except (tarfile.TarError, EOFError) as error:
        rec.fail("samples", f"{rel}: not a readable tar ({error})", start)
        return
    if index != end:
        rec.fail("samples", f"{rel}: holds dataset_index {start}..{index - 1}, its name promises {start}..{end - 1}",
                 start)


def _check_sample(members: dict[str, bytes], index: int, config: CacheConfig, manifest: list[bytes],
                  rec: CheckRecorder) -> None:
    if index < len(manifest) and members[ROW] != manifest[index]:
        rec.fail("samples", f"{sample_key(index)}.{ROW} differs from row {index} of {MANIFEST}", index)
    try:
        latent = npy_array(members[LATENT])
    except ValueError as error:
        rec.fail("samples", f"{sample_key(index)}.{LATENT} is not a .npy array ({error})", index)
        return
    if latent.shape != tuple(config.latent.shape) or latent.dtype != np.dtype(config.latent_dtype):
        rec.fail("samples", f"latent {latent.dtype} {list(latent.shape)}, cache_config.json promises "
                 f"{config.latent_dtype} {list(config.latent.shape)}", index)
    elif config.tokens is not None:
        problem = id_range_problem(latent, config.tokens.vocabulary)
        if problem:
            rec.fail("token_ids", f"{config.latent.dataset} holds {problem}", index)
    elif not np.isfinite(latent).all():
        rec.fail("latents_finite", "NaN or Inf in the latent", index)
    if config.text is not None:
        _check_text(members, f"sample {sample_key(index)}", config, rec, index)
    _check_streams(members, index, config, rec)


def _streams(config: CacheConfig) -> tuple[ConditioningStream, ...]:
    return config.streams


def _check_streams(members: dict[str, bytes], index: int, config: CacheConfig, rec: CheckRecorder) -> None:
    """Each conditioning member: a .npy of the recorded dtype and shape, finite, its mask as built; and the row's
    condition_frame."""
    for stream in _streams(config):
        member = stream_member(stream.name)
        try:
            values = npy_array(members[member])
        except ValueError as error:
            rec.fail("samples", f"{sample_key(index)}.{member} is not a .npy array ({error})", index)
            continue
        if values.dtype != np.dtype(stream.dtype):
            rec.fail(CONDITIONING_CHECK, f"dataset_index {index}: {stream.name} is {values.dtype}, cache_config.json "
                     f"promises {stream.dtype}", index)
        elif problem := stream_row_problem(stream, values):
            rec.fail(CONDITIONING_CHECK, f"dataset_index {index}: {problem}", index)
    try:
        row = ManifestRow.from_json(json.loads(members[ROW]))
    except (ValueError, TypeError):
        return  # the row differs from the manifest's or does not parse: reported as samples
    if problem := condition_frame_problem(config.conditioning is not None, row.condition_frame, row.frame_indices):
        rec.fail(CONDITIONING_CHECK, f"dataset_index {index}: {problem}", index)


def _check_text(members: dict[str, bytes], what: str, config: CacheConfig, rec: CheckRecorder,
                index: int | None = None) -> None:
    text = config.text
    try:
        length, row = int(members[LENGTH]), npy_array(members[TEXT])
    except ValueError as error:
        rec.fail("samples", f"{what}: unreadable text ({error})", index)
        return
    if not 0 <= length <= text.max_length or row.shape != (length, text.dim) or row.dtype != np.dtype(
            config.storage_dtype):
        rec.fail("samples", f"{what}: text {row.dtype} {list(row.shape)} with length {length}; expected "
                 f"{config.storage_dtype} [length, {text.dim}] with length <= {text.max_length}", index)
    elif not np.isfinite(row).all():
        rec.fail("text_finite", f"{what}: NaN or Inf in the text embedding", index)


def check_empty_prompt(reader: HashingReader, config: CacheConfig, rec: CheckRecorder) -> None:
    if config.text is None:
        rec.fail("empty_prompt", f"{EMPTY_PROMPT_TAR} is present, but the cache has no text")
        return
    try:
        samples = list(_samples(reader))
    except (tarfile.TarError, EOFError) as error:
        rec.fail("empty_prompt", f"{EMPTY_PROMPT_TAR}: not a readable tar ({error})")
        return
    if [key for key, _ in samples] != [EMPTY_PROMPT_KEY] or set(samples[0][1]) != {TEXT, LENGTH}:
        rec.fail("empty_prompt", f"{EMPTY_PROMPT_TAR} should hold one sample {EMPTY_PROMPT_KEY!r} with "
                 f"{TEXT} and {LENGTH}")
        return
    _check_text(samples[0][1], EMPTY_PROMPT_TAR, config, rec)
