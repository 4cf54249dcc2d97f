"""The WebDataset cache on disk or in object storage (docs/webdataset.md): shard names, sample members, and how
samples are cut into shards of a target size.

```
ROOT/shards/part-KKKKK-of-NNNNN-START-END.tar   samples in dataset_index order, one key each
ROOT/empty_prompt.tar  manifest.jsonl  rejects.jsonl  cache_config.json  README.md  SHA256SUMS  _CACHE_COMPLETE
```
A sample `KEY` (its dataset_index, nine digits) is the members `KEY.latent.npy` ([C, T', H', W'], storage dtype),
`KEY.text.npy` (its first `length` tokens, [length, D]), `KEY.length.cls` (the length, ASCII) and `KEY.json`
(its manifest row); a cache with conditioning streams adds `KEY.NAME.npy` per stream (`image_cond_latent`,
`clip_image_embeds`: docs/conditioning.md); members in name order, as webdataset's TarWriter writes them
(mtime 0, so the bytes are a function of the content alone).
"""

from __future__ import annotations

import io
import re

import numpy as np

from ...cache.layout import SHARDS_DIR

SINK = "webdataset"
EMPTY_PROMPT_TAR = "empty_prompt.tar"
EMPTY_PROMPT_KEY = "empty_prompt"
LATENT, TEXT, LENGTH, ROW = "latent.npy", "text.npy", "length.cls", "json"


def stream_member(name: str) -> str:
    """The member of a conditioning stream (cache/conditioning_streams.py): its name as a .npy."""
    return f"{name}.npy"


# What Megatron-Energon's `energon prepare ROOT` adds to a WebDataset root: its index folder, and beside each tar an
# index of the tar's byte offsets (megatron/energon/flavors/webdataset/config.py MAIN_FOLDER_NAME, itar.py
# ITAR_SUFFIX). Not part of the cache; verify notes them instead of failing (docs/webdataset.md).
READER_INDEX_DIR = ".nv-meta"
TAR_INDEX_SUFFIX = ".idx"


def reader_index_files(present: set[str], tars: set[str]) -> set[str]:
    """The files of `present` that a reader's index put there: under READER_INDEX_DIR/, or `<tar>.idx` beside one of
    the cache's own `tars`."""
    return {rel for rel in present
            if rel.startswith(READER_INDEX_DIR + "/") or (rel.endswith(TAR_INDEX_SUFFIX)
                                                          and rel[: -len(TAR_INDEX_SUFFIX)] in tars)}


def sample_key(dataset_index: int) -> str:
    return f"{dataset_index:09d}"


_TAR_SHARD = re.compile(r"^part-\d{5}-of-\d{5}-\d{9}-\d{9}\.tar$")
_TAR_SHARD_PATH = re.compile(rf"^{SHARDS_DIR}/part-(\d{{5}})-of-(\d{{5}})-(\d{{9}})-(\d{{9}})\.tar$")


def is_tar_shard_name(name: str) -> bool:
    """Is `name` (inside shards/) a tar shard's name?"""
    return bool(_TAR_SHARD.match(name))


def tar_shard_path(k: int, n: int, start: int, end: int) -> str:
    """The name of shard k of n, samples [start, end). n is the shard count of the commit that wrote the tar: a
    later --extend keeps a tar whose samples stay, name and all (its KEY.json members name it)."""
    return f"{SHARDS_DIR}/part-{k:05d}-of-{n:05d}-{start:09d}-{end:09d}.tar"


def tar_shard_numbers(rel: str) -> tuple[int, int, int, int] | None:
    """(k, n, start, end) of a tar shard's path relative to the root; None for any other path."""
    match = _TAR_SHARD_PATH.match(rel)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]), int(match[4]))


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def npy_array(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def cut_shards(sample_bytes: list[int], target_bytes: int) -> list[tuple[int, int]]:
    """[start, end) of each shard: samples in order, a shard closed once its samples' array bytes reach
    `target_bytes` (so a shard holds at least one sample); a function of the content alone, so reruns cut the
    same shards."""
    ranges: list[tuple[int, int]] = []
    start, filled = 0, 0
    for index, size in enumerate(sample_bytes):
        filled += size
        if filled >= target_bytes:
            ranges.append((start, index + 1))
            start, filled = index + 1, 0
    if start < len(sample_bytes):
        ranges.append((start, len(sample_bytes)))
    return ranges

