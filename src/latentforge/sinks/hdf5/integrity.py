"""Integrity verify of a cache on disk: does it match what its own records promise? (docs/verify.md)

Every check has a stable name; a failing one names the dataset_index it concerns where one applies
(for a whole shard, the shard's first dataset_index, with the range in the detail). Samples are read one
at a time, so memory stays at one sample whatever the shard size.
"""

from __future__ import annotations

import json
from collections.abc import Container, Mapping
from pathlib import Path

import h5py
import numpy as np

from ...cache.check_report import CheckRecorder, VerifyReport
from ...cache.checksums import find_sum_problems
from ...cache.conditioning_streams import (
    CONDITIONING_CHECK,
    CONDITIONING_DETAIL,
    stream_row_problem,
)
from ...cache.config_file import CacheConfig
from ...cache.count_check import check_counts
from ...cache.encoded_by import function_digest
from ...cache.layout import (
    COMPLETE_MARKER,
    EMPTY_PROMPT,
    PUBLISHED_MARKER,
    REJECTS,
    ROOT_ENTRIES,
    SHARDS_DIR,
    SOURCE_INDEX_DATASET,
    DatasetSpecs,
    ShardSchema,
)
from ...cache.text_rows import TRIMMED
from ...cache.token_ids import id_range_problem
from ...errors import REJECT_REASONS, CacheIntegrityError
from ...progress import Advance, Progress, start_step
from ...records import REJECT_KEYS, REJECT_STAGES, Reject
from .manifest_checks import ManifestFacts, check_manifest, check_manifest_table

Shards = list[tuple[str, int, int]]


def check_markers(root: Path, rec: CheckRecorder, require_complete: bool) -> None:
    if require_complete and not (root / COMPLETE_MARKER).is_file():
        rec.fail("markers", f"{COMPLETE_MARKER} is missing: the build did not finish its commit")
    if (root / PUBLISHED_MARKER).exists() and not (root / COMPLETE_MARKER).is_file():
        rec.fail("markers", f"{PUBLISHED_MARKER} is present without {COMPLETE_MARKER}: published but never completed")
    rec.close("markers", "markers consistent")


def _check_root_entries(root: Path, rec: CheckRecorder) -> None:
    if not root.is_dir():
        rec.fail("root_layout", f"{root} is not a folder; give the cache root (the folder holding cache_config.json)")
        return
    for path in sorted(root.iterdir()):
        if path.name not in ROOT_ENTRIES:
            rec.fail("root_layout", f"{path.name} does not belong in a cache root (docs/cache-format.md); move it "
                     "out of the cache and drop its line from SHA256SUMS")
    rec.close("root_layout", "the root holds only the cache's own files")


def _load_config(root: Path, rec: CheckRecorder) -> CacheConfig | None:
    try:
        return CacheConfig.load(root)
    except CacheIntegrityError as error:
        rec.fail("cache_config", str(error))
        return None


def _check_shard_files(root: Path, config: CacheConfig, shards: Shards, rec: CheckRecorder) -> None:
    if config.num_shards != len(shards):
        rec.fail("shard_files", f"cache_config num_shards={config.num_shards!r}, but {config.num_samples} samples at "
                 f"{config.rows_per_shard} per shard make {len(shards)}")
    shard_dir = root / SHARDS_DIR
    present = {f"{SHARDS_DIR}/{p.name}" for p in shard_dir.iterdir()} if shard_dir.is_dir() else set()
    for rel, start, end in shards:
        if rel not in present:
            rec.fail("shard_files", f"{rel} (dataset_index {start}..{end - 1}) is missing", start)
    for rel in sorted(present - {rel for rel, _, _ in shards}):
        rec.fail("shard_files", f"{rel} is not a shard of this cache")
    rec.close("shard_files", f"{len(shards)} shards named as expected")


def _check_sums(root: Path, shards: Shards, rec: CheckRecorder, progress: Progress | None = None,
                trusted: Mapping[str, str] | None = None) -> None:
    where = {rel: (start, end) for rel, start, end in shards}
    for problem in find_sum_problems(root, progress, trusted):
        if problem.path in where:
            start, end = where[problem.path]
            rec.fail("sha256sums", f"{problem} (dataset_index {start}..{end - 1})", start)
        else:
            rec.fail("sha256sums", str(problem))
    rec.close("sha256sums", "every file matches SHA256SUMS and every file is listed")


def _check_encoded_by(config: CacheConfig, manifest_units: set[int], rec: CheckRecorder) -> None:
    """Every unit from one function, the cache's; several environments are worth a warning."""
    if config.encoded_by is None:
        rec.close("encoded_by", "cache_config.json does not record which encoder made which units")
        return
    expected = function_digest(config.tokenizer)
    seen: set[int] = set()
    for group in config.encoded_by:
        units = group.unit_set()
        if units & seen:
            rec.fail("encoded_by", f"units {sorted(units & seen)[:5]} are listed under two encoders")
        seen |= units
        if group.function != expected:
            rec.fail("encoded_by", f"units {[list(r) for r in group.units][:5]} were encoded by another function "
                     f"(tokenizer fingerprint digest {group.function[:16]}...) than cache_config.json's tokenizer "
                     f"({expected[:16]}...); rebuild those units")
    missing = sorted(manifest_units - seen)
    if missing:
        rec.fail("encoded_by", f"manifest units {missing[:5]} are not listed in encoded_by")
    environments = config.environments
    if len(environments) > 1:
        rec.warn("encoded_by", f"the units were encoded in {len(environments)} environments (a build resumed "
                 "elsewhere): each unit is exact for its own, but the cache equals no single uninterrupted build; "
                 + " | ".join(", ".join(f"{k} {v}" for k, v in env.items() if k != "latentforge")
                              for env in environments))
    rec.close("encoded_by", f"every unit from the cache's tokenizer function, in {len(environments)} environment(s)")


def _dataset_problems(handle: h5py.File, specs: DatasetSpecs) -> list[str]:
    problems = []
    if set(handle.keys()) != set(specs):
        problems.append(f"datasets {sorted(handle.keys())}, expected {sorted(specs)}")
    for name, (dtype, shape) in specs.items():
        dataset = handle.get(name)
        if not isinstance(dataset, h5py.Dataset):
            continue
        # a trimmed text dataset's dtype is variable-length: its element dtype is compared too
        got = (dataset.dtype, h5py.check_vlen_dtype(dataset.dtype), dataset.shape, dataset.chunks,
               dataset.id.get_create_plist().get_nfilters())
        want = (dtype, h5py.check_vlen_dtype(dtype), shape, (1, *shape[1:]), 0)
        if got != want:
            problems.append(f"{name}: dtype/shape/chunks/filters {got}, expected {want}")
    return problems


def _check_rows(handle: h5py.File, schema: ShardSchema, start: int, manifest: ManifestFacts,
                rec: CheckRecorder, advance: Advance, scan: bool = True) -> None:
    sources = handle[SOURCE_INDEX_DATASET][()]
    latents = handle[schema.latent_dataset]
    for row in range(latents.shape[0]):
        advance(1)
        index = start + row
        want = manifest.source_index(index)
        if want is not None and int(sources[row]) != want:
            rec.fail("source_index", f"dataset_index {index}: shard source_index {int(sources[row])}, "
                     f"manifest {want}", index)
        if not scan:
            continue
        if schema.vocabulary is not None:
            problem = id_range_problem(latents[row], schema.vocabulary)
            if problem:
                rec.fail("token_ids", f"dataset_index {index}: {schema.latent_dataset} holds {problem}", index)
        elif not np.isfinite(latents[row]).all():
            rec.fail("latents_finite", f"dataset_index {index}: {schema.latent_dataset} holds NaN or Inf", index)
        if schema.text_prefix is not None:
            _check_text_row(handle, schema, row, index, rec)
        for stream in schema.conditioning:
            problem = stream_row_problem(stream, handle[stream.name][row])
            if problem:
                rec.fail(CONDITIONING_CHECK, f"dataset_index {index}: {problem}", index)


def _check_text_row(handle: h5py.File, schema: ShardSchema, row: int, index: int | None, rec: CheckRecorder) -> None:
    where = f"dataset_index {index}" if index is not None else EMPTY_PROMPT
    embeddings = handle[schema.embeddings_dataset][row]
    length = int(handle[schema.length_dataset][row])
    if not np.isfinite(embeddings).all():
        rec.fail("text_finite", f"{where}: {schema.embeddings_dataset} holds NaN or Inf", index)
    if length > schema.max_length:
        rec.fail("text_padding", f"{where}: {schema.length_dataset}={length} > max_length {schema.max_length}", index)
    elif schema.text_storage == TRIMMED:  # no padding stored: the row must hold exactly its length's tokens
        if embeddings.size != length * int(schema.text_dim or 0):
            rec.fail("text_padding", f"{where}: the trimmed {schema.embeddings_dataset} row holds {embeddings.size} "
                     f"values, length {length} x dim {schema.text_dim} expected", index)
    elif np.any(embeddings[length:]):
        rec.fail("text_padding", f"{where}: {schema.embeddings_dataset} rows at and past length {length} "
                 "are not all zero", index)


def _check_shards(root: Path, schema: ShardSchema, shards: Shards, manifest: ManifestFacts,
                  rec: CheckRecorder, progress: Progress | None, unscanned: set[str] | None = None) -> None:
    advance = start_step(progress, "rows", shards[-1][2] if shards else 0, unit="samples")
    for rel, start, end in shards:
        if not (root / rel).is_file():
            continue  # reported by shard_files
        try:
            with h5py.File(root / rel, "r") as handle:
                problems = _dataset_problems(handle, schema.dataset_specs(end - start))
                if problems:
                    rec.fail("shard_datasets", f"{rel} (dataset_index {start}..{end - 1}): {'; '.join(problems)}",
                             start)
                    continue
                _check_rows(handle, schema, start, manifest, rec, advance, rel not in (unscanned or ()))
        except (OSError, KeyError, ValueError) as exc:
            rec.fail("shard_readable", f"{rel} (dataset_index {start}..{end - 1}) cannot be read: {exc}", start)
    rec.close("shard_readable", f"{len(shards)} shards open and read")
    rec.close("shard_datasets", "every dataset has the expected name, dtype, shape, one-sample chunks, no filters")
    rec.close("source_index", "shard source_index agrees with the manifest")
    if schema.vocabulary is not None:
        rec.close("token_ids", f"every token id is below the vocabulary {schema.vocabulary}")
    else:
        rec.close("latents_finite", "no NaN or Inf in latents")
    if schema.conditioning:
        rec.close(CONDITIONING_CHECK, CONDITIONING_DETAIL)  # also over the manifest's condition_frame
    if schema.text_prefix is not None:
        rec.close("text_finite", "no NaN or Inf in text embeddings")
        rec.close("text_padding", "text rows at and past each length are zero")


def _check_empty_prompt(root: Path, config: CacheConfig, schema: ShardSchema, rec: CheckRecorder) -> None:
    path = root / EMPTY_PROMPT
    wanted = config.text is not None and config.text.empty_prompt
    if not wanted:
        if path.exists():
            rec.fail("empty_prompt", f"{EMPTY_PROMPT} is present but cache_config does not promise it")
    elif not path.is_file():
        rec.fail("empty_prompt", f"{EMPTY_PROMPT} is missing; cache_config text.empty_prompt is true")
    else:
        try:
            with h5py.File(path, "r") as handle:
                problems = _dataset_problems(handle, schema.empty_prompt_specs())
                if problems:
                    rec.fail("empty_prompt", f"{EMPTY_PROMPT}: {'; '.join(problems)}")
                else:
                    _check_text_row(handle, schema, 0, None, rec)
        except (OSError, KeyError, ValueError) as exc:
            rec.fail("empty_prompt", f"{EMPTY_PROMPT} cannot be read: {exc}")
    rec.close("empty_prompt", "empty prompt as promised")


def check_rejects(root: Path, accepted_sources: Container[int], rec: CheckRecorder) -> int:
    """The rejects file's rows are well formed and in order; returns how many it lists."""
    try:
        lines = (root / REJECTS).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        rec.fail("rejects", f"{REJECTS} cannot be read: {exc!r}")
        lines = []
    order_keys = []
    for line_no, line in enumerate(lines, start=1):
        try:
            reject = Reject.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError):
            rec.fail("rejects", f"{REJECTS} line {line_no} is not an object with keys {', '.join(REJECT_KEYS)}")
            continue
        if not reject.well_formed:
            rec.fail("rejects", f"{REJECTS} line {line_no}: reason {reject.reason!r} / stage {reject.stage!r} "
                     f"not in {REJECT_REASONS} / {REJECT_STAGES}")
        if reject.stage == "plan":
            order_keys.append((0, 0, str(reject.sample_id)))
        elif isinstance(reject.source_index, int):
            order_keys.append((1, reject.source_index, str(reject.sample_id)))
            if reject.source_index in accepted_sources:
                rec.fail("rejects", f"{REJECTS} line {line_no}: source_index {reject.source_index} is also in the "
                         "manifest")
        else:
            rec.fail("rejects", f"{REJECTS} line {line_no}: source_index {reject.source_index!r} is not an int")
    if order_keys != sorted(order_keys):
        rec.fail("rejects", f"{REJECTS} is not in order (plan rejects by sample_id, then by source_index)")
    rec.close("rejects", f"{len(lines)} rejects with allowed reasons")
    return len(lines)


def verify_integrity(root: Path, require_complete: bool = True, progress: Progress | None = None,
                     trusted: Mapping[str, str] | None = None) -> VerifyReport:
    """Every integrity check of docs/verify.md; the report is ok only if all of them pass. `progress` gets the
    two long steps: "sha256" (bytes hashed) and "rows" (samples read). `trusted`: {shard path: SHA-256} of shards a
    commit verified before and did not write again: their hash is taken as given and their rows are not scanned
    (their metadata and source_index still are)."""
    trusted = trusted or {}
    root = Path(root)
    rec = CheckRecorder()
    check_markers(root, rec, require_complete)
    _check_root_entries(root, rec)
    config = _load_config(root, rec)
    if config is None:
        _check_sums(root, [], rec)
        return rec.report
    rec.close("cache_config", "cache_config.json parses and describes a layout")
    schema = config.shard_schema()
    shards = config.shard_paths()
    _check_shard_files(root, config, shards, rec)
    _check_sums(root, shards, rec, progress, trusted)
    manifest = check_manifest(root, config.num_samples, shards, rec, config.conditioning is not None)
    check_manifest_table(root, rec)
    _check_encoded_by(config, manifest.units, rec)
    _check_shards(root, schema, shards, manifest, rec, progress, set(trusted))
    _check_empty_prompt(root, config, schema, rec)
    check_counts(config, check_rejects(root, manifest.accepted(), rec), rec)
    return rec.report
