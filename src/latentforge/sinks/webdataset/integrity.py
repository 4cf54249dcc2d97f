"""`latentforge verify` of a WebDataset cache, local or at an fsspec URL: the integrity checks that apply to tar
shards (docs/webdataset.md).

Every object is read once: its SHA-256 is taken while its tar members are parsed, so a shard on S3 is
downloaded once per verify. Checks: the markers, cache_config.json, SHA256SUMS against every object (and no
object left out of it), shard names covering dataset_index 0..N-1, the manifest, and each tar's members
against the manifest (sinks/webdataset/tar_checks.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ...cache.check_report import CheckRecorder, VerifyReport
from ...cache.conditioning_streams import CONDITIONING_CHECK, CONDITIONING_DETAIL
from ...cache.config_file import CacheConfig
from ...cache.count_check import check_counts
from ...cache.layout import (
    CACHE_CONFIG,
    COMPLETE_MARKER,
    MANIFEST,
    NOT_CHECKSUMMED,
    PUBLISHED_MARKER,
    REJECTS,
    RUN_RECORDS_DIR,
    SUMS,
)
from ...errors import CacheIntegrityError, ConfigError
from ...hashing import compare_sums, parse_sums
from ...progress import Progress, start_step
from ...storage import Storage
from .layout import EMPTY_PROMPT_TAR, READER_INDEX_DIR, SINK, TAR_INDEX_SUFFIX, reader_index_files, tar_shard_numbers
from .tar_checks import HashingReader, check_empty_prompt, check_tar


def verify_webdataset(url: str, require_complete: bool = True, progress: Progress | None = None,
                      storage_options: dict[str, Any] | None = None) -> VerifyReport:
    store = Storage(url, dict(storage_options or {}))
    rec = CheckRecorder()
    # a local root's build/ holds a commit's next cache until it is swapped in (sinks/webdataset/local_swap.py)
    present = {rel: size for rel, size in store.list_files().items() if not rel.startswith(RUN_RECORDS_DIR + "/")}
    _check_markers(store, present, rec, require_complete)
    config = _load_config(store, present, rec)
    if config is None:
        return rec.report
    listed: dict[str, str] = {}
    if SUMS not in present:
        rec.fail("sha256sums", f"{SUMS} is missing; the cache was not committed")
    else:
        listed, unparsable = parse_sums(store.read(SUMS).decode("utf-8"), SUMS)
        for line in unparsable:
            rec.fail("sha256sums", line)
    shards = _shard_ranges(listed, config, rec)
    manifest = _manifest_lines(store, present, config, rec)
    advance = start_step(progress, "samples", config.num_samples, unit="samples")
    digests: dict[str, str] = {}
    for rel in sorted(set(listed) & set(present)):
        with store.open(rel) as raw:
            reader = HashingReader(raw)
            if rel in shards:
                check_tar(reader, rel, shards[rel], config, manifest, rec, advance)
            elif rel == EMPTY_PROMPT_TAR:
                check_empty_prompt(reader, config, rec)
            digests[rel] = reader.rest()
    checksummed = {rel for rel in present if rel not in NOT_CHECKSUMMED}
    checksummed -= _note_reader_index(checksummed, listed, rec)
    for problem in compare_sums(listed, checksummed, SUMS, digests.__getitem__):
        rec.fail("sha256sums", str(problem))
    rec.close("sha256sums", "every object matches SHA256SUMS and every object is listed")
    rejects = store.read(REJECTS).decode("utf-8").splitlines() if REJECTS in present else []
    check_counts(config, len(rejects), rec)
    if config.text is not None and config.text.empty_prompt and EMPTY_PROMPT_TAR not in listed:
        rec.fail("empty_prompt", f"cache_config.json promises an empty prompt, but {EMPTY_PROMPT_TAR} is not listed")
    rec.close("empty_prompt", "empty prompt as promised")
    for name, detail in (("shard_files", "the shards cover dataset_index 0..N-1 as cache_config.json counts"),
                         ("manifest", "one manifest row per sample, dataset_index dense"),
                         ("samples", "every tar holds its keys in order with the members the manifest promises"),
                         _latent_check(config),
                         ("text_finite", "no NaN or Inf in text embeddings")):
        rec.close(name, detail)
    if config.conditioning is not None:
        rec.close(CONDITIONING_CHECK, CONDITIONING_DETAIL)
    return rec.report


def _latent_check(config: CacheConfig) -> tuple[str, str]:
    if config.tokens is not None:
        return "token_ids", f"every token id is below the vocabulary {config.tokens.vocabulary}"
    return "latents_finite", "no NaN or Inf in latents"


def _note_reader_index(present: set[str], listed: dict[str, str], rec: CheckRecorder) -> set[str]:
    """The files Megatron-Energon's `energon prepare` added (layout.reader_index_files), noted as a warning; any
    other file SHA256SUMS does not list still fails."""
    found = reader_index_files(present, {rel for rel in listed if rel.endswith(".tar")})
    if found:
        folder = sorted(rel for rel in found if rel.startswith(READER_INDEX_DIR + "/"))
        beside = len(found) - len(folder)
        parts = ([f"{READER_INDEX_DIR}/ ({len(folder)} files)"] if folder else []) + \
            ([f"{beside} <tar>{TAR_INDEX_SUFFIX} file(s) beside the tars"] if beside else [])
        rec.warn("reader_index", f"{' and '.join(parts)}: a reader's index (Megatron-Energon's `energon prepare`), "
                 "not part of the cache and not checked; run the prepare again if the cache changes")
    return found


def _check_markers(store: Storage, present: dict[str, int], rec: CheckRecorder, require_complete: bool) -> None:
    complete = COMPLETE_MARKER in present
    if require_complete and not complete:
        rec.fail("markers", f"{COMPLETE_MARKER} is missing: the build did not finish its commit")
    if PUBLISHED_MARKER in present and not complete:
        rec.fail("markers", f"{PUBLISHED_MARKER} is present without {COMPLETE_MARKER}: published but never completed")
    if PUBLISHED_MARKER in present and SUMS in present:
        try:
            claimed = json.loads(store.read(PUBLISHED_MARKER)).get("sha256sums_sha256")
        except (ValueError, AttributeError):
            claimed = None
        if claimed != hashlib.sha256(store.read(SUMS)).hexdigest():
            rec.fail("markers", f"{PUBLISHED_MARKER} vouches for another {SUMS} than the one there: the objects "
                     "changed after they were published; publish the cache again from a trusted copy")
    rec.close("markers", "markers consistent")


def _load_config(store: Storage, present: dict[str, int], rec: CheckRecorder) -> CacheConfig | None:
    try:
        if CACHE_CONFIG not in present:
            raise CacheIntegrityError(f"{store.url} has no {CACHE_CONFIG}")
        data = json.loads(store.read(CACHE_CONFIG))
        if (data.get("sink") or {}).get("name") != SINK:
            raise CacheIntegrityError(f"{CACHE_CONFIG} does not record sink {SINK!r}")
        config = CacheConfig.from_json(data)
    except (CacheIntegrityError, ConfigError, ValueError, AttributeError) as error:
        rec.fail("cache_config", str(error))
        return None
    rec.close("cache_config", "cache_config.json parses and describes a WebDataset cache")
    return config


def _shard_ranges(listed: dict[str, str], config: CacheConfig, rec: CheckRecorder) -> dict[str, tuple[int, int]]:
    """{shard: (start, end)} of the shards SHA256SUMS lists, failing names and gaps. A name's count N is the shard
    count of the commit that wrote the tar: the cache's, or a smaller one for a tar an --extend kept."""
    shards: dict[str, tuple[int, int]] = {}
    for rel in sorted(r for r in listed if r.startswith("shards/")):
        numbers = tar_shard_numbers(rel)
        if numbers is None:
            rec.fail("shard_files", f"{rel} is not a shard name of this layout (shards/part-K-of-N-START-END.tar)")
            continue
        k, n, start, end = numbers
        if not k < n <= config.num_shards or k != len(shards) or start != sum(e - s for s, e in shards.values()):
            rec.fail("shard_files", f"{rel} does not follow shard {len(shards)} of {config.num_shards}", start)
        shards[rel] = (start, end)
    if len(shards) != config.num_shards or sum(e - s for s, e in shards.values()) != config.num_samples:
        rec.fail("shard_files", f"{len(shards)} shards listed hold {sum(e - s for s, e in shards.values())} samples; "
                 f"cache_config.json counts {config.num_shards} shards and {config.num_samples} samples")
    return shards


def _manifest_lines(store: Storage, present: dict[str, int], config: CacheConfig,
                    rec: CheckRecorder) -> list[bytes]:
    if MANIFEST not in present:
        rec.fail("manifest", f"{MANIFEST} is missing")
        return []
    lines = store.read(MANIFEST).splitlines()
    if len(lines) != config.num_samples:
        rec.fail("manifest", f"{MANIFEST} has {len(lines)} rows, cache_config.json counts {config.num_samples}")
    for index, line in enumerate(lines):
        try:
            found = json.loads(line).get("dataset_index")
        except (ValueError, AttributeError):
            found = None
        if found != index:
            rec.fail("manifest", f"row {index} of {MANIFEST} has dataset_index {found!r}", index)
    return lines
