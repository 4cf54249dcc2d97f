"""What a reader needs from a cache root: the root itself and a typed view of cache_config.json.

The cache carries its own description (DESIGN §7.2), so a trainer needs no flags beyond the root.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CacheIntegrityError, ConfigError

ROOT_ENV = "LATENTFORGE_CACHE_ROOT"
# Seed 000's trainer reads its cache root from this variable; accepted as an alias of ROOT_ENV.
ROOT_ENV_ALIAS = "WORLD_PERCEPTION_LATENT_CACHE_ROOT"
FORMAT = "latentforge-cache"
FORMAT_VERSION = 1
COMPLETE_MARKER = "_CACHE_COMPLETE"
EMPTY_PROMPT_FILE = "empty_prompt.h5"


def resolve_cache_root(root: str | os.PathLike[str] | None) -> Path:
    """`root`, else $LATENTFORGE_CACHE_ROOT, else $WORLD_PERCEPTION_LATENT_CACHE_ROOT."""
    if root is None:
        root = os.environ.get(ROOT_ENV) or os.environ.get(ROOT_ENV_ALIAS)
    if not root:
        raise ConfigError(
            f"no cache root given; pass root=... or set {ROOT_ENV} (or its alias {ROOT_ENV_ALIAS})"
        )
    path = Path(root)
    if not (path / "cache_config.json").is_file():
        raise ConfigError(f"{path} is not a latentforge cache: it has no cache_config.json")
    return path


@dataclass(frozen=True)
class ModalityInfo:
    name: str
    channels: tuple[int, int]  # [start, end) in the stored latent
    role: str  # "conditioning+target" | "target"


@dataclass(frozen=True)
class CacheInfo:
    """The parts of cache_config.json that decide how rows are read and what they mean."""

    root: Path
    config: dict[str, Any]  # the whole cache_config.json, for expectation checks
    num_samples: int
    storage_dtype: str
    latent_dataset: str
    latent_shape: tuple[int, int, int, int]  # [C_total, T', H', W']
    modalities: tuple[ModalityInfo, ...]
    conditioning_modality: str | None
    conditioning_frames: tuple[int, int]  # [start, end) latent frames of the conditioning modality
    text_name: str | None  # None: the cache holds no text
    text_embeddings_dataset: str | None
    text_length_dataset: str | None
    text_dim: int | None
    text_max_length: int | None

    def modality(self, name: str) -> ModalityInfo:
        for entry in self.modalities:
            if entry.name == name:
                return entry
        raise ConfigError(
            f"modality {name!r} is not in the cache {self.root}; it holds: "
            f"{', '.join(m.name for m in self.modalities)}"
        )


def load_cache_info(root: Path, require_complete: bool = True) -> CacheInfo:
    """Parse ROOT/cache_config.json; raise CacheIntegrityError when the file breaks the format contract."""
    if require_complete and not (root / COMPLETE_MARKER).is_file():
        raise CacheIntegrityError(
            f"{root} has no {COMPLETE_MARKER}: the cache is still being built or its verify failed; "
            "finish the build (rerun it) or pass require_complete=False to read it anyway"
        )
    config = json.loads((root / "cache_config.json").read_text(encoding="utf-8"))
    if config.get("format") != FORMAT or config.get("format_version") != FORMAT_VERSION:
        raise CacheIntegrityError(
            f"{root}/cache_config.json: format {config.get('format')!r} version {config.get('format_version')!r}; "
            f"this reader understands {FORMAT!r} version {FORMAT_VERSION}"
        )
    try:
        latent = config["latent"]
        shape = tuple(int(v) for v in latent["shape"])
        modalities = tuple(
            ModalityInfo(m["name"], (int(m["channels"][0]), int(m["channels"][1])), m["role"])
            for m in latent["modalities"]
        )
        conditioning = latent.get("conditioning") or {}
        text = config["text"]
        info = CacheInfo(
            root=root,
            config=config,
            num_samples=int(config["num_samples"]),
            storage_dtype=str(config["storage_dtype"]),
            latent_dataset=str(latent["dataset"]),
            latent_shape=shape,  # type: ignore[arg-type]
            modalities=modalities,
            conditioning_modality=conditioning.get("modality"),
            conditioning_frames=tuple(conditioning.get("latent_frames", (0, 1))),  # type: ignore[arg-type]
            text_name=None if text is None else str(text["name"]),
            text_embeddings_dataset=None if text is None else str(text["embeddings_dataset"]),
            text_length_dataset=None if text is None else str(text["length_dataset"]),
            text_dim=None if text is None else int(text["dim"]),
            text_max_length=None if text is None else int(text["max_length"]),
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CacheIntegrityError(f"{root}/cache_config.json is malformed: {exc!r}") from None
    _check_channels(info)
    return info


def _check_channels(info: CacheInfo) -> None:
    """Modality channel ranges must tile the stored channels, or slices would read the wrong modality."""
    cursor = 0
    for entry in info.modalities:
        start, end = entry.channels
        if start != cursor or end <= start:
            raise CacheIntegrityError(
                f"{info.root}/cache_config.json: modality {entry.name!r} channels {list(entry.channels)} do not "
                f"follow the previous range ending at {cursor}"
            )
        cursor = end
    if cursor != info.latent_shape[0] or len(info.latent_shape) != 4:
        raise CacheIntegrityError(
            f"{info.root}/cache_config.json: modality channels end at {cursor} but latent.shape is "
            f"{list(info.latent_shape)}"
        )
    names = [m.name for m in info.modalities]
    if info.conditioning_modality is not None and info.conditioning_modality not in names:
        raise CacheIntegrityError(
            f"{info.root}/cache_config.json: conditioning modality {info.conditioning_modality!r} is not one of "
            f"the cached modalities {names}"
        )
