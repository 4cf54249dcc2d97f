"""How many bytes a cache will take, and a refusal to start a build the disk cannot hold."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from .. import registry
from ..config import BuildConfig
from ..errors import ConfigError, LatentforgeError
from ..hub import cached_snapshot, looks_like_hub_id
from ..pipeline.side_streams import SIDE_DTYPE, side_specs

STORAGE_ITEMSIZE = {"float16": 2, "float32": 4}
TEXT_LENGTH_BYTES = 2  # uint16 per row
SOURCE_INDEX_BYTES = 8  # int64 per row
# Measured with h5py 3 (one-sample chunks, no compression): the chunk index costs about 52 bytes per chunk and
# a shard's superblock and object headers about 16 KiB; rounded up so the estimate stays an upper bound.
HDF5_BYTES_PER_CHUNK = 64
HDF5_BYTES_PER_SHARD = 64 << 10
# A manifest row is ~0.5 KiB plus its prompt; OpenVid-style captions run to ~1 KiB.
MANIFEST_BYTES_PER_ROW = 2 << 10
# README, cache_config.json, SHA256SUMS, rejects.jsonl, markers.
FIXED_BYTES = 1 << 20


def _text_dim_hint(config: BuildConfig) -> int:
    """Embedding width from the text model's config.json, for the disk estimate (4096 when unknown)."""
    folder = Path(config.text.path or "")
    if config.text.path and looks_like_hub_id(config.text.path):
        folder = cached_snapshot(config.text.path) or folder
    path = folder / "config.json"
    if path.is_file():
        return int(json.loads(path.read_text(encoding="utf-8")).get("d_model", 4096))
    return 4096


def output_shapes(config: BuildConfig) -> tuple[tuple[int, ...], tuple[int, int] | None]:
    """One row's latent [C_total, T', H', W'] and text [max_length, D] (None without text)."""
    tokenizer_cls = registry.resolve("tokenizer", config.tokenizer.name)
    latent = tokenizer_cls.latent_shape(config.frames.num_frames, config.frames.height, config.frames.width)
    total = (latent[0] * len(config.modalities.names), *latent[1:])
    text = None if config.text.name == "none" else (config.text.max_length, _text_dim_hint(config))
    return total, text


# The released CLIP ViT-H/14's tokens per image (257 x 1280): the estimate's size of one image encoder row, known
# exactly only once the encoder is loaded
IMAGE_EMBEDS_VALUES = 257 * 1280


def conditioning_values(config: BuildConfig) -> tuple[int, int]:
    """(values, datasets) one row's conditioning streams add (docs/conditioning.md)."""
    values = datasets = 0
    if config.conditioning.image_latent == "wan-i2v":
        tokenizer_cls = registry.resolve("tokenizer", config.tokenizer.name)
        channels, *grid = tokenizer_cls.latent_shape(config.frames.num_frames, config.frames.height,
                                                     config.frames.width)
        values, datasets = values + (4 + channels) * math.prod(grid), datasets + 1
    if config.conditioning.image_embeds != "none":
        values, datasets = values + IMAGE_EMBEDS_VALUES, datasets + 1
    return values, datasets


def side_values(config: BuildConfig) -> tuple[int, int]:
    """(values, datasets) one row's per-frame side streams add (docs/modalities.md): [num_frames, D] each, stored
    as float32 whatever output.storage_dtype is."""
    specs = side_specs(config)
    return config.frames.num_frames * sum(dim for _, dim in specs), len(specs)


def estimate_output_bytes(
    num_samples: int,
    latent_shape: tuple[int, ...],
    text_shape: tuple[int, ...] | None,
    storage_dtype: str,
    *,
    rows_per_shard: int = 3000,
    conditioning: tuple[int, int] = (0, 0),
    side: tuple[int, int] = (0, 0),
) -> int:
    """Upper estimate of the finished cache's size: shards, empty_prompt.h5, manifest and small files.

    latent_shape is one row's [C, T', H', W'] (all modalities); text_shape one row's [max_length, D], or
    None without text; conditioning the (values, datasets) of a row's conditioning streams (conditioning_values),
    side those of its side streams (side_values), which are float32 in every cache.
    Staging under build/ is not counted: the caller adds it if staged batches and
    shards coexist on the same disk.
    """
    if storage_dtype not in STORAGE_ITEMSIZE:
        raise ConfigError(f"output.storage_dtype={storage_dtype!r}; allowed: {', '.join(STORAGE_ITEMSIZE)}")
    if num_samples < 0:
        raise LatentforgeError(f"num_samples={num_samples} must be >= 0")
    itemsize = STORAGE_ITEMSIZE[storage_dtype]
    row = math.prod(latent_shape) * itemsize + SOURCE_INDEX_BYTES
    chunks_per_row = 2 + conditioning[1] + side[1]
    row += conditioning[0] * itemsize + side[0] * STORAGE_ITEMSIZE[SIDE_DTYPE]
    text_row = 0
    if text_shape is not None:
        text_row = math.prod(text_shape) * itemsize + TEXT_LENGTH_BYTES
        chunks_per_row += 2
    row += text_row + chunks_per_row * HDF5_BYTES_PER_CHUNK + MANIFEST_BYTES_PER_ROW
    shards = math.ceil(num_samples / rows_per_shard)
    empty_prompt = text_row + HDF5_BYTES_PER_SHARD if text_shape is not None else 0
    return num_samples * row + shards * HDF5_BYTES_PER_SHARD + empty_prompt + FIXED_BYTES


def _existing_ancestor(path: Path) -> Path:
    """The folder the cache will land in, or the nearest existing folder above a root not yet created."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _gib(value: int) -> str:
    return f"{value / (1 << 30):.2f} GiB ({value} bytes)"


def check_free_disk(root: Path, needed_bytes: int, margin_bytes: int, what: str = "") -> None:
    """Raise LatentforgeError naming needed (for `what`), free and the folder when needed + margin exceeds free
    space."""
    folder = _existing_ancestor(Path(root))
    free = shutil.disk_usage(folder).free
    if needed_bytes + margin_bytes > free:
        raise LatentforgeError(
            f"not enough free disk for the cache at {root}: needs {_gib(needed_bytes)}"
            f"{f' ({what})' if what else ''} plus a margin of "
            f"{_gib(margin_bytes)} (output.min_free_bytes), but {folder} has {_gib(free)} free; free space, "
            "choose another output.root, or lower output.min_free_bytes"
        )
