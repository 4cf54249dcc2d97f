"""cache_config.json, typed: everything a reader needs to use a cache and to check it fits its trainer
(docs/cache-format.md). Builds write it from `cache_config_for_build` (cache/build_records.py); everything else
reads it with `load`.

Nothing in it may depend on time, host, output path, worker count or executor: the file is checksummed and
must be byte-identical across reruns.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import REBUILD_OR_FETCH, CacheIntegrityError, ConfigError, DamagedFile
from ..io import write_text_atomic
from .audio_section import AudioSection
from .conditioning_streams import ConditioningSection, ConditioningStream
from .config_sections import LatentSection, ModalityEntry, TextSection, TokenSection
from .encoded_by import EncodedBy
from .layout import CACHE_CONFIG, ShardSchema
from .text_rows import PADDED

FORMAT = "latentforge-cache"
FORMAT_VERSION = 1
PIXEL_RANGE = "uint8 v -> v/127.5 - 1 (256-entry table)"


@dataclass(frozen=True)
class CacheConfig:
    """cache_config.json. `frames`, `modalities`, `dataset` and `build` record the build's settings as given;
    builds write every section, readers need only the typed ones."""

    latentforge_version: str
    preset: str | None
    num_samples: int
    num_shards: int
    rows_per_shard: int
    storage_dtype: str
    latent: LatentSection
    tokenizer: dict[str, Any]  # the tokenizer's fingerprint: what defines the function it computes
    text: TextSection | None
    frames: dict[str, Any]
    modalities: dict[str, Any] | None = None
    dataset: dict[str, Any] | None = None
    build: dict[str, Any] | None = None
    encoded_by: tuple[EncodedBy, ...] | None = None  # which function and environment made which units
    # the kernel plans the units ran, per environment digest: {digest: {convolution signature: plan name}}
    conv_plans: dict[str, dict[str, str]] | None = None
    # every candidate the plan held, and how many of them rejects.jsonl lists: num_samples + num_rejected must
    # equal num_planned (None in caches written before the counts were recorded)
    num_planned: int | None = None
    num_rejected: int | None = None
    conditioning: ConditioningSection | None = None  # image conditioning beside the latent; None: none built
    # per-frame side streams (pose, actions, ...) stored beside the latent, float32 [T, D] each (docs/modalities.md)
    side_streams: tuple[ConditioningStream, ...] = ()
    # how the captions were generated and the near duplicates removed (cache/curation.py); None: not done
    captions: dict[str, Any] | None = None
    dedup: dict[str, Any] | None = None
    audio: AudioSection | None = None  # each window's sound beside the latent (docs/audio.md); None: none stored

    @property
    def streams(self) -> tuple[ConditioningStream, ...]:
        """Every per-sample array stored beside the latent under its own name: conditioning, side streams, sound."""
        return ((() if self.conditioning is None else self.conditioning.streams) + self.side_streams
                + (() if self.audio is None else self.audio.streams))

    # ------------------------------------------------------------------------------- typed views
    @property
    def tokenizer_name(self) -> str | None:
        return self.tokenizer.get("name")

    @property
    def tokenizer_family(self) -> str:
        """A backend fingerprint may name its family; otherwise the backend name is the family."""
        return str(self.tokenizer.get("family") or self.tokenizer.get("name"))

    @property
    def checkpoint_sha256(self) -> str | None:
        return self.tokenizer.get("checkpoint_sha256")

    @property
    def precision(self) -> str:
        return str(self.tokenizer.get("precision", "fp32"))

    @property
    def num_frames(self) -> int:
        return int(self.frames["num_frames"])

    @property
    def height(self) -> int:
        return int(self.frames["height"])

    @property
    def width(self) -> int:
        return int(self.frames["width"])

    @property
    def fps(self) -> str | None:
        """"source", or the target rate the frames were resampled to; None when not recorded."""
        return None if self.frames.get("fps") is None else str(self.frames["fps"])

    @property
    def tokens(self) -> TokenSection | None:
        """The token ids' vocabulary and grid when a discrete tokenizer made the cache; None for float latents."""
        return self.latent.tokens

    @property
    def latent_dtype(self) -> str:
        """The latent dataset's dtype: storage_dtype (which the text embeddings always use), or the token ids'."""
        return self.storage_dtype if self.tokens is None else self.tokens.dtype

    def modality(self, name: str) -> ModalityEntry:
        for entry in self.latent.modalities:
            if entry.name == name:
                return entry
        raise ConfigError(f"modality {name!r} is not in the cache; it holds: {', '.join(self.modality_names)}")

    @property
    def modality_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.latent.modalities)

    def shard_schema(self) -> ShardSchema:
        text = self.text
        return ShardSchema(
            latent_dataset=self.latent.dataset,
            latent_shape=tuple(self.latent.shape),
            storage_dtype=self.storage_dtype,
            latent_dtype=self.latent_dtype,
            vocabulary=None if self.tokens is None else self.tokens.vocabulary,
            rows_per_shard=self.rows_per_shard,
            text_prefix=None if text is None else text.prefix,
            text_dim=None if text is None else text.dim,
            max_length=0 if text is None else text.max_length,
            text_storage=PADDED if text is None else text.storage,
            conditioning=self.streams,
        )

    def shard_paths(self) -> list[tuple[str, int, int]]:
        return self.shard_schema().shard_paths(self.num_samples)

    def committed(self, num_samples: int, num_shards: int, encoded_by: tuple[EncodedBy, ...] | None,
                  num_planned: int, num_rejected: int) -> CacheConfig:
        """This config with what commit counts and gathers filled in."""
        return dataclasses.replace(self, num_samples=num_samples, num_shards=num_shards, encoded_by=encoded_by,
                                   num_planned=num_planned, num_rejected=num_rejected)

    @property
    def environments(self) -> list[dict[str, str]]:
        """The distinct environments that encoded the units, in order of first unit."""
        found: list[dict[str, str]] = []
        for group in self.encoded_by or ():
            if group.environment not in found:
                found.append(group.environment)
        return found

    # --------------------------------------------------------------------------------- writing
    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "latentforge_version": self.latentforge_version,
            "preset": self.preset,
            "num_samples": self.num_samples,
            **({} if self.num_planned is None else {"num_planned": self.num_planned,
                                                    "num_rejected": self.num_rejected}),
            "num_shards": self.num_shards,
            "rows_per_shard": self.rows_per_shard,
            "storage_dtype": self.storage_dtype,
            "latent": self.latent.to_json(),
            "tokenizer": self.tokenizer,
            "text": None if self.text is None else self.text.to_json(),
            "frames": self.frames,
        }
        if self.conditioning is not None:  # only then: a cache without conditioning keeps its bytes
            data["conditioning"] = self.conditioning.to_json()
        if self.side_streams:  # likewise
            data["side_streams"] = [stream.to_json() for stream in self.side_streams]
        if self.audio is not None:  # likewise
            data["audio"] = self.audio.to_json()
        for name in ("modalities", "dataset", "captions", "dedup", "build"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.encoded_by is not None:
            data["encoded_by"] = [group.to_json() for group in self.encoded_by]
        if self.conv_plans:
            data["conv_plans"] = self.conv_plans
        return data

    def to_text(self) -> str:
        """The file's text: objects one key a line, lists on one line each item (docs/cache-format.md)."""
        return _json_text(self.to_json()) + "\n"

    def write(self, root: Path) -> None:
        write_text_atomic(Path(root) / CACHE_CONFIG, self.to_text())

    # --------------------------------------------------------------------------------- reading
    @classmethod
    def from_json(cls, data: Any) -> CacheConfig:
        """Parse and check; raises CacheIntegrityError naming what breaks the format."""
        if not isinstance(data, dict):
            raise CacheIntegrityError(f"{CACHE_CONFIG} holds {type(data).__name__}, not an object; {REBUILD_OR_FETCH}")
        problems = [f"{key}={data.get(key)!r}, expected {want!r}" for key, want in
                    (("format", FORMAT), ("format_version", FORMAT_VERSION)) if data.get(key) != want]
        if problems:
            raise CacheIntegrityError(f"{CACHE_CONFIG}: " + "; ".join(problems) + f"; this reader understands "
                                      f"{FORMAT!r} version {FORMAT_VERSION}")
        try:
            parsed = cls(
                latentforge_version=str(data.get("latentforge_version", "")),
                preset=data.get("preset"),
                num_samples=_count(data, "num_samples"),
                num_shards=_count(data, "num_shards"),
                rows_per_shard=_count(data, "rows_per_shard"),
                storage_dtype=str(data["storage_dtype"]),
                latent=LatentSection.from_json(data["latent"]),
                tokenizer=dict(data.get("tokenizer") or {}),
                text=None if data["text"] is None else TextSection.from_json(data["text"]),
                frames=dict(data.get("frames") or {}),
                modalities=data.get("modalities"),
                dataset=data.get("dataset"),
                build=data.get("build"),
                captions=data.get("captions"),
                dedup=data.get("dedup"),
                encoded_by=None if data.get("encoded_by") is None else tuple(
                    EncodedBy.from_json(group) for group in data["encoded_by"]),
                conv_plans=None if data.get("conv_plans") is None else {
                    str(digest): {str(k): str(v) for k, v in book.items()}
                    for digest, book in data["conv_plans"].items()},
                num_planned=_count(data, "num_planned") if "num_planned" in data else None,
                num_rejected=_count(data, "num_rejected") if "num_planned" in data else None,
                conditioning=None if data.get("conditioning") is None else ConditioningSection.from_json(
                    data["conditioning"]),
                side_streams=tuple(ConditioningStream.from_json(s) for s in data.get("side_streams") or ()),
                audio=None if data.get("audio") is None else AudioSection.from_json(data["audio"]),
            )
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise CacheIntegrityError(f"{CACHE_CONFIG} lacks or garbles what the format needs: {exc!r}; "
                                      f"{REBUILD_OR_FETCH}") from None
        parsed._check()
        return parsed

    @classmethod
    def load(cls, root: Path) -> CacheConfig:
        """ROOT/cache_config.json; CacheIntegrityError when it is missing or breaks the format."""
        path = Path(root) / CACHE_CONFIG
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CacheIntegrityError(f"{root} has no {CACHE_CONFIG}; is it a latentforge cache root?") from None
        except (OSError, ValueError) as exc:
            raise DamagedFile(path, f"not JSON: {exc}", REBUILD_OR_FETCH) from None
        return cls.from_json(data)

    def _check(self) -> None:
        """Counts, and modality channel ranges that tile the stored channels (or slices read the wrong one)."""
        if self.rows_per_shard < 1:
            raise CacheIntegrityError(f"{CACHE_CONFIG}: rows_per_shard={self.rows_per_shard} must be >= 1")
        cursor = 0
        for entry in self.latent.modalities:
            start, end = entry.channels
            if start != cursor or end <= start:
                raise CacheIntegrityError(f"{CACHE_CONFIG}: modality {entry.name!r} channels {list(entry.channels)} "
                                          f"do not follow the previous range ending at {cursor}")
            cursor = end
        if len(self.latent.shape) != 4 or cursor != self.latent.shape[0]:
            raise CacheIntegrityError(f"{CACHE_CONFIG}: modality channels end at {cursor} but latent.shape is "
                                      f"{list(self.latent.shape)}")
        conditioning = self.latent.conditioning_modality
        if conditioning is not None and conditioning not in self.modality_names:
            raise CacheIntegrityError(f"{CACHE_CONFIG}: conditioning modality {conditioning!r} is not one of the "
                                      f"cached modalities {list(self.modality_names)}")


def _count(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key}={value!r} is not a count")
    return value


def _json_text(value: Any, indent: int = 0) -> str:
    if isinstance(value, dict) and value:
        pad = " " * (indent + 2)
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {_json_text(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        pad = " " * (indent + 2)
        items = [pad + json.dumps(v, ensure_ascii=False, allow_nan=False) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
