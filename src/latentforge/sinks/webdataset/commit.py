"""Commit staged units as a WebDataset cache written straight to a store URL (s3://, gs://, file://, memory://).

The same staged units and the same rules as the HDF5 commit (sinks/hdf5/commit.py): dense dataset_index in
source_index order, shard contents a function of the content alone, manifest, rejects, cache_config, README,
SHA256SUMS, and `_CACHE_COMPLETE` last, with the HDF5 commit's fault points (commit after each shard, manifest,
sha256sums, marker). Each tar is written to a node-local staging folder, hashed, uploaded and
confirmed (by the store's checksums, or read back where it keeps none); an object already there with the same
bytes is kept, so a rerun after a kill uploads only what is missing and leaves identical objects.

In a local folder the new cache is written whole into ROOT/build/next and swapped in once confirmed
(sinks/webdataset/local_swap.py), the root's objects with the same bytes hard-linked rather than copied: the folder
holds a complete cache throughout. There the root's tars whose samples stay where they were are kept without being
written again, and the rows of staged units an earlier commit retired are read back from its tars (shard_layout.py,
published_tars.py): how `build --extend` grows such a cache. A store URL has no rename, so there the markers are
withdrawn first and the objects replaced in place.
"""

from __future__ import annotations

import contextlib
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ...cache.config_file import CacheConfig
from ...cache.layout import CACHE_CONFIG, COMPLETE_MARKER, MANIFEST, PUBLISHED_MARKER, README, REJECTS, SUMS
from ...cache.rows import ManifestRow
from ...errors import CacheIntegrityError, ConfigError
from ...hashing import format_sums
from ...io import canonical_json
from ...records import Reject
from ...staging.gather import PlacedRow, Planned, gather_staged, manifest_rows, ordered_rejects, planned_count
from ...staging.staged_units import OpenStagedUnit, open_staged_unit
from ...testing.fault_points import fault_point
from ...transfer.destinations import Destination, open_remote
from ...transfer.digests import FileDigest, hash_bytes, hash_file
from ...transfer.stores import LocalDirRemote, Remote
from .layout import (
    EMPTY_PROMPT_KEY,
    EMPTY_PROMPT_TAR,
    LATENT,
    LENGTH,
    ROW,
    SINK,
    TEXT,
    npy_bytes,
    sample_key,
    stream_member,
)
from .local_swap import NextGeneration
from .published_tars import PublishedTars, record_tar_stats
from .shard_layout import plan_shards

MIB = 1 << 20


@dataclass(frozen=True)
class WebDatasetOptions:
    staging: Path  # node-local folder for one tar at a time
    shard_bytes: int = 512 * MIB  # a shard is closed once its samples' arrays reach this many bytes
    part_size: int = 64 * MIB  # multipart part size on S3
    server_checksum: bool = True  # S3 ChecksumAlgorithm SHA256; off for S3-compatible servers without it


@dataclass
class WebDatasetCommit:
    url: str
    num_samples: int
    shard_paths: list[str]
    uploaded: list[str] = field(default_factory=list)  # objects this run wrote
    kept: list[str] = field(default_factory=list)  # objects already there with the same bytes


def commit_webdataset(destination: Destination, unit_paths: list[Path], plan_rejects: list[Reject],
                      cache_config: CacheConfig, empty_prompt: tuple[np.ndarray, np.ndarray] | None,
                      options: WebDatasetOptions, planned: Planned, allow_empty: bool = False,
                      records: Path | None = None) -> WebDatasetCommit:
    """`records`: the build's records folder, where a local root's commit notes its tars as it left them, so the next
    commit trusts them without reading them again (published_tars.py)."""
    if options.shard_bytes < 1:
        raise ConfigError(f"shard_bytes={options.shard_bytes}; use 1 or more")
    remote = open_remote(destination.url, destination.storage_options, options.part_size, options.server_checksum)
    published = None
    if isinstance(remote, LocalDirRemote):
        remote = NextGeneration(remote)
        published = PublishedTars(remote.published.base, cache_config.shard_schema(), records)
    else:
        for marker in (COMPLETE_MARKER, PUBLISHED_MARKER, SUMS):  # nothing may vouch for what is about to change
            remote.delete(marker)
    remote.discard_partials()
    with contextlib.closing(published) if published is not None else contextlib.nullcontext():
        result, digests = _commit(remote, published, unit_paths, plan_rejects, cache_config, empty_prompt, options,
                                  planned, allow_empty)
    if isinstance(remote, NextGeneration):
        remote.swap_in()
        record_tar_stats(records, remote.published.base, {rel: digest.sha256 for rel, digest in digests.items()})
    return result


def _commit(remote: Remote, published: PublishedTars | None, unit_paths: list[Path], plan_rejects: list[Reject],
            cache_config: CacheConfig, empty_prompt: tuple[np.ndarray, np.ndarray] | None, options: WebDatasetOptions,
            planned: Planned, allow_empty: bool) -> tuple[WebDatasetCommit, dict[str, FileDigest]]:
    """Every object of the new cache written and confirmed, the complete-marker last; their digests by path."""
    schema = cache_config.shard_schema()
    placed, unit_rejects, encoded_by = gather_staged(schema, unit_paths, planned, allow_empty, published)
    shards, kept = plan_shards(placed, schema, options.shard_bytes, published)
    rejects = ordered_rejects(plan_rejects, unit_rejects)
    config = cache_config.committed(len(placed), len(shards), encoded_by, planned_count(planned, plan_rejects),
                                    len(rejects))
    rows = manifest_rows(placed, shards)
    result = WebDatasetCommit(remote.url, len(placed), [rel for rel, _, _ in shards])
    digests: dict[str, FileDigest] = {}
    options.staging.mkdir(parents=True, exist_ok=True)
    for rel, start, end in shards:
        if rel in kept and isinstance(remote, NextGeneration):  # its samples stay where they were: so does the tar
            digests[rel] = remote.keep(rel, kept[rel], options.part_size)
            result.kept.append(rel)
            continue
        with contextlib.ExitStack() as stack:  # samples stream into the tar: one shard is never held in memory
            paths = sorted({placed.unit_path_at(i) for i in range(start, end)})
            units = {path: stack.enter_context(open_staged_unit(path, published)) for path in paths}
            samples = (_sample(placed[i], units[placed[i].unit_path], rows[i], schema.text_prefix is not None)
                       for i in range(start, end))
            digests[rel] = _put_tar(remote, rel, samples, options, result)
        fault_point("commit")  # test-only: a kill between shards
    if empty_prompt is not None:
        embeddings, length = empty_prompt
        sample = {"__key__": EMPTY_PROMPT_KEY, TEXT: npy_bytes(embeddings[0][: int(length[0])]),
                  LENGTH: str(int(length[0])).encode()}
        digests[EMPTY_PROMPT_TAR] = _put_tar(remote, EMPTY_PROMPT_TAR, [sample], options, result)
    small = {
        REJECTS: "".join(canonical_json(r.to_json()) + "\n" for r in rejects),
        CACHE_CONFIG: canonical_json({**config.to_json(), "sink": {"name": SINK, "shard_bytes": options.shard_bytes}})
        + "\n",
        MANIFEST: "".join(canonical_json(row.to_json()) + "\n" for row in rows),
        README: _readme(config, len(shards)),
    }
    for rel, text in small.items():
        digests[rel] = _put_bytes(remote, rel, text.encode("utf-8"), options, result)
    fault_point("manifest")
    _remove_stale(remote, set(digests))
    sums = format_sums((digests[rel].sha256, rel) for rel in sorted(digests)).encode("utf-8")
    digests[SUMS] = _put_bytes(remote, SUMS, sums, options, result)
    fault_point("sha256sums")
    # a kept tar is the root's own file, whose bytes were vouched for before it was linked: its size is checked
    failed = [f"{rel}: {reason}" for rel, digest in digests.items()
              if (reason := remote.problem(rel, digest, deep=not remote.stores_checksums and rel not in kept))]
    if failed:
        raise CacheIntegrityError(f"{remote.url}: objects not confirmed; rerun the commit:\n  " + "\n  ".join(failed))
    stamp = canonical_json({"num_samples": len(placed), "num_shards": len(shards), "sink": SINK}) + "\n"
    fault_point("marker")
    _put_bytes(remote, COMPLETE_MARKER, stamp.encode("utf-8"), options, result)
    return result, digests


def _sample(placed: PlacedRow, staged: OpenStagedUnit, row: ManifestRow, text: bool) -> dict[str, Any]:
    sample: dict[str, Any] = {"__key__": sample_key(row.dataset_index),
                              LATENT: npy_bytes(staged.latents[placed.position])}
    if text:
        length = int(staged.text_lengths[placed.position])
        sample[TEXT] = npy_bytes(staged.text_embeddings[placed.position][:length])
        sample[LENGTH] = str(length).encode()
    for name, values in staged.conditioning.items():  # gather_staged checked them against the cache's streams
        sample[stream_member(name)] = npy_bytes(values[placed.position])
    sample[ROW] = canonical_json(row.to_json()).encode("utf-8")
    return sample


def _put_tar(remote: Remote, rel: str, samples: Iterable[dict[str, Any]], options: WebDatasetOptions,
             result: WebDatasetCommit) -> FileDigest:
    from webdataset import TarWriter

    local = options.staging / rel.replace("/", "__")
    try:
        with open(local, "wb") as handle:
            writer = TarWriter(handle, encoder=False, mtime=0.0, format=tarfile.USTAR_FORMAT)
            for sample in samples:
                writer.write(sample)
            writer.close()
        digest = hash_file(local, options.part_size)
        _upload_unless_there(remote, rel, local, digest, result)
    finally:
        local.unlink(missing_ok=True)
    return digest


def _put_bytes(remote: Remote, rel: str, data: bytes, options: WebDatasetOptions,
               result: WebDatasetCommit) -> FileDigest:
    digest = hash_bytes(data, options.part_size)
    _upload_unless_there(remote, rel, data, digest, result)
    return digest


def _upload_unless_there(remote: Remote, rel: str, source: Path | bytes, digest: FileDigest,
                         result: WebDatasetCommit) -> None:
    if isinstance(remote, NextGeneration):
        there = remote.link_published(rel, digest)
    else:
        there = remote.problem(rel, digest, deep=not remote.stores_checksums) is None
    if there:
        result.kept.append(rel)
        return
    remote.upload(rel, source, digest)
    result.uploaded.append(rel)


def _remove_stale(remote: Remote, keep: set[str]) -> None:
    """Objects of an earlier commit with other counts (other shard names) would otherwise sit beside this one."""
    for rel in remote.list_files():
        if rel not in keep and rel not in (SUMS, COMPLETE_MARKER, PUBLISHED_MARKER):
            remote.delete(rel)


def _readme(config: CacheConfig, num_shards: int) -> str:
    text = config.text
    lines = [
        "# latentforge cache (WebDataset)", "",
        f"{config.num_samples} samples in {num_shards} tar shards under `shards/`, one key per sample (its "
        "`dataset_index`, nine digits): `KEY.latent.npy` "
        f"({config.latent_dtype} {list(config.latent.shape)}"
        + (f", token ids below {config.tokens.vocabulary}" if config.tokens is not None else "") + "), "
        + (f"`KEY.text.npy` (the first `length` of {text.max_length} tokens, D = {text.dim}; zero-pad to "
           f"{text.max_length} rows for the padded tensor), `KEY.length.cls`, " if text is not None else "")
        + "`KEY.json` (the manifest row).", "",
        "Read it with `latentforge.StreamingLatentDataset(URL)`, or any WebDataset reader. "
        "`sha256sum -c SHA256SUMS` checks a downloaded copy.", "",
    ]
    return "\n".join(lines)

