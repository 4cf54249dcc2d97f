"""Every name in a cache root, in one place: files, markers, run records, shard names, and the HDF5 datasets
each shard holds (docs/cache-format.md).

```
ROOT/README.md cache_config.json manifest.jsonl manifest.parquet rejects.jsonl empty_prompt.h5 SHA256SUMS
ROOT/_CACHE_COMPLETE [_SUCCESS]
ROOT/shards/part-KKKKK-of-NNNNN-START-END.h5
ROOT/build/   run records: run.json, plan, staging/, models.json, stats-<utc>.json, lock (never checksummed);
              during a commit's swap, build/swap: the whole new cache, which readers read until it is in the root
```
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from .conditioning_streams import ConditioningStream
from .text_rows import PADDED, TRIMMED, trimmed_dtype

# --------------------------------------------------------------------------------------- the root
CACHE_CONFIG = "cache_config.json"
MANIFEST = "manifest.jsonl"
MANIFEST_TABLE = "manifest.parquet"  # manifest.jsonl as a flat table, for queries (sinks/hdf5/manifest_table.py)
REJECTS = "rejects.jsonl"
EMPTY_PROMPT = "empty_prompt.h5"
README = "README.md"
SUMS = "SHA256SUMS"
COMPLETE_MARKER = "_CACHE_COMPLETE"  # built, and its integrity verified where it was built
PUBLISHED_MARKER = "_SUCCESS"  # every object confirmed at every publish destination
SHARDS_DIR = "shards"
RUN_RECORDS_DIR = "build"
# Markers say something about the cache's state, not its content; build/ holds run records.
NOT_CHECKSUMMED = frozenset({SUMS, COMPLETE_MARKER, PUBLISHED_MARKER})
# Everything a cache root may hold; verify fails on anything else, listed in SHA256SUMS or not.
ROOT_ENTRIES = frozenset({CACHE_CONFIG, MANIFEST, MANIFEST_TABLE, REJECTS, EMPTY_PROMPT, README, SUMS, COMPLETE_MARKER,
                          PUBLISHED_MARKER, SHARDS_DIR, RUN_RECORDS_DIR})

# ------------------------------------------------------------- a bucketed root (frames.buckets)
# ROOT/buckets.json rejects.jsonl SHA256SUMS _CACHE_COMPLETE [_SUCCESS]; ROOT/buckets/<F>x<H>x<W>/ one cache each
BUCKET_INDEX = "buckets.json"
BUCKETS_DIR = "buckets"
BUCKETED_ROOT_ENTRIES = frozenset({BUCKET_INDEX, REJECTS, SUMS, COMPLETE_MARKER, PUBLISHED_MARKER, BUCKETS_DIR,
                                   RUN_RECORDS_DIR})


def bucket_path(name: str) -> str:
    """A bucket's cache root, relative to the bucketed root."""
    return f"{BUCKETS_DIR}/{name}"


def bucket_markers(checksummed: list[str]) -> list[str]:
    """The _CACHE_COMPLETE of every bucket whose SHA256SUMS is among a bucketed root's checksummed files:
    not checksummed (they hold a time), but moved with the cache so each bucket stays complete alone."""
    return sorted(rel[: -len(SUMS)] + COMPLETE_MARKER for rel in checksummed
                  if rel.startswith(BUCKETS_DIR + "/") and rel.count("/") == 2 and rel.endswith("/" + SUMS))


# ------------------------------------------------------------------ run records, under ROOT/build/
LOCK = "lock"
RUN_RECORD = "run.json"  # the resume key and the inputs' fingerprint
PLAN = "plan.jsonl"
PLAN_REJECTS = "plan_rejects.jsonl"
FINGERPRINT = "fingerprint.json"
MODEL_RECORD = "models.json"
MODEL_EMPTY_PROMPT = "models-empty-prompt.npz"
STAGING_DIR = "staging"
COMMITTED_RECORD = "committed.json"  # which plan the cache at the root was last committed from
SHARD_DIGESTS = "shard_digests.json"  # the SHA-256 of each shard as its commit wrote it: whose rows a commit may copy
SHARD_STATS = "shard_stats.json"  # the size and mtime of each shard with a recorded digest, as its commit left it
TAR_STATS = "tar_stats.json"  # a local WebDataset cache's tars as its commit left them: size, mtime, SHA-256
PROBE_RECORD = "probes.pickle"  # each sample's probe result with the content key and settings it was made from
# A commit's new cache files, beside the cache until they replace it whole (cache/generation_swap.py): written
# under build/next, made the copy readers read by renaming it build/swap, moved into the root, then retired.
NEXT_GENERATION = "next"
SWAP_GENERATION = "swap"
RETIRED_GENERATION = "retired"
STACKS_DIR = "stacks"
VERIFY_REPORT = "verify_report.json"
STATS_FOLDER = "stats"
PREVIEW_FOLDER = "preview"
SCAN_REJECTS = "scan-rejects.jsonl"
ANALYSIS_DIR = "analysis"  # one record per analysed video: shots and quality measures (pipeline/analysis_records.py)
CAPTIONS_DIR = "captions"  # one record per generated caption, by its window's identity (pipeline/caption_records.py)
DEDUP_DIR = "dedup"  # each window's CLIP embedding and the kept windows' list (pipeline/dedup_records.py)


def rank_traceback_name(rank: int) -> str:
    """The full traceback of a rank whose unit failed; the error line names this file."""
    return f"rank{rank}-traceback.txt"


def run_stats_name(stamp: str) -> str:
    return f"stats-{stamp}.json"


def scan_record_name(stamp: str) -> str:
    return f"scan-{stamp}.json"

TMP_LEFTOVER = re.compile(r"^\..+\.tmp\d+$")  # io.atomic_path's tmp siblings

# ------------------------------------------------------------------------------------------ shards
SOURCE_INDEX_DATASET = "source_index"
_SHARD_NAME = re.compile(r"^part-(\d{5})-of-(\d{5})-(\d{9})-(\d{9})\.h5$")


def shard_ranges(num_samples: int, rows_per_shard: int) -> list[tuple[int, int]]:
    """[start, end) of each shard's dataset_index range; the last shard may be shorter."""
    count = math.ceil(num_samples / rows_per_shard)
    return [(k * rows_per_shard, min((k + 1) * rows_per_shard, num_samples)) for k in range(count)]


def shard_name(k: int, n: int, start: int, end: int) -> str:
    return f"part-{k:05d}-of-{n:05d}-{start:09d}-{end:09d}.h5"


def shard_paths(num_samples: int, rows_per_shard: int) -> list[tuple[str, int, int]]:
    """(relative path "shards/part-…h5", start, end) of every shard of a cache."""
    ranges = shard_ranges(num_samples, rows_per_shard)
    return [(f"{SHARDS_DIR}/{shard_name(k, len(ranges), s, e)}", s, e) for k, (s, e) in enumerate(ranges)]


def shard_rows(name: str) -> tuple[int, int] | None:
    """(start, end) of the dataset_index range a shard file name covers; None for any other name."""
    match = _SHARD_NAME.match(name)
    return None if match is None else (int(match.group(3)), int(match.group(4)))


def text_datasets(prefix: str) -> tuple[str, str]:
    """The embeddings and length datasets of a text encoder whose datasets are named by `prefix` ("t5")."""
    return f"{prefix}_text_embeddings", f"{prefix}_text_length"


def text_prefix(embeddings_dataset: str, length_dataset: str) -> str:
    """The prefix two text dataset names share; ValueError when they do not follow text_datasets()."""
    suffix = "_text_embeddings"
    prefix = embeddings_dataset[: -len(suffix)]
    if not embeddings_dataset.endswith(suffix) or text_datasets(prefix) != (embeddings_dataset, length_dataset):
        raise ValueError(f"text datasets {embeddings_dataset!r}/{length_dataset!r} do not share a prefix")
    return prefix


DatasetSpecs = dict[str, tuple[np.dtype, tuple[int, ...]]]


@dataclass(frozen=True)
class ShardSchema:
    """What every shard holds: dataset names, per-sample shapes and dtypes, rows per shard."""

    latent_dataset: str
    latent_shape: tuple[int, ...]  # [C_total, T', H', W']
    storage_dtype: str  # float16 | float32: the text embeddings', and the latents' unless latent_dtype says
    rows_per_shard: int
    text_prefix: str | None  # "t5" -> t5_text_embeddings / t5_text_length; None: no text datasets
    text_dim: int | None
    max_length: int
    text_storage: str = PADDED  # padded: [N, max_length, D]; trimmed: [N] variable-length (text_rows.py)
    latent_dtype: str | None = None  # the token ids' unsigned integer dtype; None: storage_dtype
    vocabulary: int | None = None  # token ids: every stored id is below it; None: float latents
    conditioning: tuple[ConditioningStream, ...] = ()  # per-sample conditioning datasets (conditioning_streams.py)

    @property
    def embeddings_dataset(self) -> str:
        return text_datasets(str(self.text_prefix))[0]

    @property
    def length_dataset(self) -> str:
        return text_datasets(str(self.text_prefix))[1]

    def dataset_specs(self, rows: int) -> DatasetSpecs:
        """{dataset name: (dtype, full shape)} of a shard with `rows` rows, in writing order."""
        specs = {self.latent_dataset: (np.dtype(self.latent_dtype or self.storage_dtype), (rows, *self.latent_shape))}
        if self.text_prefix is not None:
            specs[self.embeddings_dataset] = (
                (trimmed_dtype(self.storage_dtype), (rows,)) if self.text_storage == TRIMMED
                else (np.dtype(self.storage_dtype), (rows, self.max_length, self.text_dim)))
            specs[self.length_dataset] = (np.dtype("uint16"), (rows,))
        for stream in self.conditioning:
            specs[stream.name] = (np.dtype(stream.dtype), (rows, *stream.shape))
        specs[SOURCE_INDEX_DATASET] = (np.dtype("int64"), (rows,))
        return specs

    def empty_prompt_specs(self) -> DatasetSpecs:
        return {k: v for k, v in self.dataset_specs(1).items() if k in (self.embeddings_dataset, self.length_dataset)}

    def shard_paths(self, num_samples: int) -> list[tuple[str, int, int]]:
        return shard_paths(num_samples, self.rows_per_shard)
