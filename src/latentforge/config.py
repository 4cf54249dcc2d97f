"""Typed build configuration: dataclasses, YAML + `section.key=value` overrides, unknown keys refused.

Validation that needs no model (geometry, modality/dataset consistency, names) happens in
`validate()`, before any weights are loaded or any GPU work starts.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

MODALITIES = ("rgb", "mask", "depth")


@dataclass
class DatasetConfig:
    reader: str = "cosmos_dir"  # cosmos_dir | table
    path: list[str] = field(default_factory=list)  # folder (cosmos_dir) or table files / globs (table)
    id_column: str | None = None
    video_column: str = "video"
    caption_column: str = "caption"
    mask_column: str | None = None
    depth_column: str | None = None
    passthrough_columns: list[str] = field(default_factory=list)
    t5_pickle_column: str | None = None  # table column: each row's Cosmos T5 pickle (text.source pickles*)
    on_missing_caption: str = "reject"  # reject | empty (an absent caption becomes the empty prompt)
    limit: int | None = None  # keep the first N candidate samples of the plan


@dataclass
class FramesConfig:
    num_frames: int = 93
    height: int = 480
    width: int = 832
    fps: str = "source"  # "source" or a target frame rate such as "16"
    window: str = "start"  # start | center | random (seeded by sample_id)
    windows: str = "one"  # "one" or "every N" (one sample per N frames, id suffixed @<start_frame>)
    resize: str = "cover_crop"  # cover_crop | stretch
    resize_backend: str = "swscale"  # swscale (in the decoder, from the source pixels) | torch (from uint8 RGB)
    resize_filter: str = "bicubic"  # swscale: bilinear | bicubic | area | lanczos; torch: bilinear | bicubic | area


@dataclass
class MaskConfig:
    ids: list[int] | None = None  # the declared id set; None allows every id of the source's bit depth
    palette: str = "golden"  # how ids map to colours; see docs/modalities.md


@dataclass
class DepthConfig:
    png_scale: float = 1000.0  # 16-bit PNG: depth = value / png_scale (e.g. millimetres -> metres)
    video_near: float = 0.0  # depth video: depth = near + (far - near) * luma / max_luma
    video_far: float = 1.0
    normalize: str = "minmax"  # minmax: per-row [lo, hi] -> [-1, 1]; params stored so it can be inverted


@dataclass
class ModalitiesConfig:
    names: list[str] = field(default_factory=lambda: ["rgb"])
    mask: MaskConfig = field(default_factory=MaskConfig)
    depth: DepthConfig = field(default_factory=DepthConfig)


@dataclass
class TokenizerConfig:
    name: str = "haar-4x8x8"
    checkpoint: str | None = None  # .pth state dict, diffusers folder or hub id (wan2.1)
    sha256: str | None = None  # refuse a checkpoint whose SHA-256 differs
    precision: str = "fp32"  # fp32 | bf16 | cosmos-bf16
    # Frames per causal chunk of the fp32 / cosmos-bf16 loops. The maths is the same for any window, but on a
    # GPU the convolution algorithms (and so the last bits) depend on it: Cosmos' video2world uses 16.
    temporal_window: int = 4
    max_gpu_mem_gib: float = 24.0  # the bf16 fast path picks its causal window to stay under this
    # bf16 fast path: let cuDNN time its kernels (about 20% faster on an H200). Re-encoding in one process stays
    # bit-identical; across processes the chosen kernels may differ, so deep verify compares within tolerance.
    cudnn_benchmark: bool = True


@dataclass
class TextConfig:
    name: str = "t5"  # t5 | umt5 | none
    path: str | None = None  # local model folder (config.json, weights, tokenizer files)
    precision: str = "fp32"  # fp32 | bf16 (fp16 overflows T5)
    max_length: int = 512
    batch_size: int = 16
    empty_prompt: bool = True  # write empty_prompt.h5
    source: str = "encoder"  # encoder | pickles | pickles+encoder: where rows come from (docs/text.md)


@dataclass
class OutputConfig:
    root: str = ""
    latent_dataset: str = "video_latent_state"
    rows_per_shard: int = 3000
    storage_dtype: str = "float16"  # float16 | bfloat16-as-uint16 is not supported; float16 | float32
    unit_size: int = 256  # samples per unit of work
    batch_size: int = 1  # samples per tokenizer call within a unit
    min_free_bytes: int = 1 << 30  # free-disk margin kept on top of the estimate


@dataclass
class RunConfig:
    device: str = "cpu"  # cpu | cuda | cuda:N
    seed: int = 0
    max_reject_fraction: float = 1.0  # abort once more than this fraction of probed samples is rejected
    # Execution only: never part of the output (docs/execution.md).
    procs: int = 1  # encoder processes on run.device when run.gpus is empty
    gpus: str = ""  # "all" or "0,1": one encoder process per GPU (indices within CUDA_VISIBLE_DEVICES)
    workers_per_gpu: int = 2  # CPU decode workers per encoder process; 0 decodes on the encoder thread
    executor: str = "local"  # local | ray (docs/execution.md)
    ray_address: str = ""  # ray: auto | HOST:PORT; empty joins RAY_ADDRESS or starts a local Ray
    max_unit_tries: int = 3  # ray: a unit whose worker fails this many times stops the build with its error


@dataclass
class BuildConfig:
    preset: str | None = None
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    frames: FramesConfig = field(default_factory=FramesConfig)
    modalities: ModalitiesConfig = field(default_factory=ModalitiesConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    text: TextConfig = field(default_factory=TextConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------------- parsing


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Convert a YAML/CLI value to the annotated type, or raise ConfigError naming the key."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return _from_dict(annotation, value, where)
    if origin is list:
        if isinstance(value, (str, int, float)):
            value = [value] if not isinstance(value, str) else [v for v in value.split(",") if v]
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if annotation in (int, float):
        try:
            return annotation(value) if not isinstance(value, bool) else _fail(where, value, annotation)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected {annotation.__name__}, got {value!r}") from None
    if annotation is str:
        return str(value)
    return value


def _fail(where: str, value: Any, annotation: Any) -> Any:
    raise ConfigError(f"{where}: expected {annotation.__name__}, got {value!r}")


def _from_dict(cls: Any, data: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in allowed]
    if unknown:
        raise ConfigError(
            f"unknown key {where + '.' if where else ''}{unknown[0]}; allowed keys"
            f"{' in ' + where if where else ''}: {', '.join(allowed)}"
        )
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}" if where else k) for k, v in data.items()}
    return cls(**kwargs)


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_override(text: str) -> dict[str, Any]:
    """'frames.num_frames=93' -> {'frames': {'num_frames': 93}} (value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.key=value")
    dotted, raw = text.split("=", 1)
    value = yaml.safe_load(raw) if raw != "" else ""
    node: dict[str, Any] = {}
    cursor = node
    parts = dotted.strip().split(".")
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    cursor[parts[-1]] = value
    return node


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    preset: str | None = None,
    extra: dict[str, Any] | None = None,
) -> BuildConfig:
    """Preset (if any) < YAML file < `extra` mapping < `section.key=value` overrides; then validate."""
    from .presets import preset_dict

    data: dict[str, Any] = {}
    file_data: dict[str, Any] = {}
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the config file must hold a mapping")
        file_data = loaded
    layers = [file_data, extra or {}] + [parse_override(o) for o in overrides]
    chosen = preset
    for layer in layers:
        chosen = layer.get("preset", chosen)
    if chosen:
        data = preset_dict(chosen)
    for layer in layers:
        data = _deep_merge(data, layer)
    config = _from_dict(BuildConfig, data, "")
    validate(config)
    return config


# ------------------------------------------------------------------------------------------- validation

_CHOICES = {
    "dataset.reader": ("cosmos_dir", "table"),
    "dataset.on_missing_caption": ("reject", "empty"),
    "frames.window": ("start", "center", "random"),
    "frames.resize": ("cover_crop", "stretch"),
    "frames.resize_backend": ("swscale", "torch"),
    "tokenizer.precision": ("fp32", "bf16", "cosmos-bf16"),
    "text.precision": ("fp32", "bf16"),
    "text.source": ("encoder", "pickles", "pickles+encoder"),
    "output.storage_dtype": ("float16", "float32"),
    "modalities.depth.normalize": ("minmax",),
}
_FILTERS = {"swscale": ("bilinear", "bicubic", "area", "lanczos"), "torch": ("bilinear", "bicubic", "area")}
_WINDOWS = re.compile(r"^(one|every \d+)$")


def _get(config: BuildConfig, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def target_fps(frames: FramesConfig) -> float | None:
    """None for the source rate, else the target frame rate."""
    return None if frames.fps == "source" else float(frames.fps)


def window_step(frames: FramesConfig) -> int | None:
    """None for `windows: one`, else N of `every N`."""
    return None if frames.windows == "one" else int(frames.windows.split()[1])


def _validate_text(config: BuildConfig) -> None:
    """Text checks, the pickle ones included: a pickles build must be able to write its empty prompt."""
    from . import registry

    text, dataset = config.text, config.dataset
    if text.max_length < 1:
        raise ConfigError(f"text.max_length={text.max_length} must be >= 1")
    if text.name != "none" and text.name not in registry.names("text"):
        raise ConfigError(f"text.name={text.name!r}; allowed: none, {', '.join(registry.names('text'))}")
    pickles = text.source != "encoder"
    if pickles and text.name != "t5":
        raise ConfigError(f"text.source={text.source!r} reads Cosmos T5 pickles (t5_xxl/<stem>.pickle), which "
                          f"hold t5 rows, but text.name={text.name!r}; set text.name=t5 or text.source=encoder")
    if text.source == "pickles+encoder" and not text.path:
        raise ConfigError("text.source=pickles+encoder encodes samples that have no pickle, but text.path is "
                          "empty; give the local t5 folder, or use text.source=pickles")
    if text.source == "pickles" and text.empty_prompt and not text.path:
        raise ConfigError("text.source=pickles takes every row from t5_xxl pickles, but empty_prompt.h5 still "
                          "needs the T5 encoder: give its folder with text.path (used only for the empty "
                          "prompt), or pass --no-empty-prompt (text.empty_prompt=false)")
    column = dataset.t5_pickle_column
    if column and not pickles:
        raise ConfigError(f"dataset.t5_pickle_column={column!r} is set but text.source=encoder reads no "
                          "pickles; set text.source=pickles or pickles+encoder, or unset the column")
    if column and dataset.reader != "table":
        raise ConfigError(f"dataset.t5_pickle_column={column!r} is for dataset.reader=table; the cosmos_dir "
                          "reader finds pickles at <dataset>/t5_xxl/<stem>.pickle, unset the column")
    if pickles and dataset.reader == "table" and not column:
        raise ConfigError(f"text.source={text.source!r} with dataset.reader=table needs dataset.t5_pickle_column: "
                          "the table column holding each row's pickle path")


def validate(config: BuildConfig) -> None:
    """Every check that needs no model and no data; raises ConfigError with the allowed values."""
    from . import registry

    for dotted, allowed in _CHOICES.items():
        value = _get(config, dotted)
        if value not in allowed:
            raise ConfigError(f"{dotted}={value!r} is not allowed; allowed: {', '.join(allowed)}")
    filters = _FILTERS[config.frames.resize_backend]
    if config.frames.resize_filter not in filters:
        raise ConfigError(
            f"frames.resize_filter={config.frames.resize_filter!r} is not available with resize_backend="
            f"{config.frames.resize_backend!r}; allowed: {', '.join(filters)}"
        )
    if not _WINDOWS.match(config.frames.windows) or window_step(config.frames) == 0:
        raise ConfigError(f"frames.windows={config.frames.windows!r}; allowed: 'one' or 'every N' with N >= 1")
    if config.frames.fps != "source":
        try:
            if float(config.frames.fps) <= 0:
                raise ValueError
        except ValueError:
            raise ConfigError(f"frames.fps={config.frames.fps!r}; allowed: 'source' or a positive number") from None
    if config.frames.num_frames < 1:
        raise ConfigError(f"frames.num_frames={config.frames.num_frames} must be >= 1")
    names = config.modalities.names
    bad = [m for m in names if m not in MODALITIES]
    if bad or not names or len(set(names)) != len(names) or names[0] != "rgb":
        raise ConfigError(
            f"modalities.names={names!r}; allowed: distinct names from {', '.join(MODALITIES)}, rgb first"
        )
    for modality, column in (("mask", config.dataset.mask_column), ("depth", config.dataset.depth_column)):
        if modality in names and config.dataset.reader == "table" and not column:
            raise ConfigError(
                f"modality {modality!r} is configured but dataset.{modality}_column is not set; set it to the "
                f"table column holding the {modality} source, or drop {modality!r} from modalities.names"
            )
        if column and modality not in names:
            raise ConfigError(
                f"dataset.{modality}_column={column!r} is set but {modality!r} is not in modalities.names "
                f"{names!r}; add it or unset the column"
            )
    if config.dataset.reader == "cosmos_dir" and any(m != "rgb" for m in names):
        raise ConfigError(
            "the cosmos_dir reader provides rgb only; use dataset.reader=table with mask_column/depth_column "
            f"for modalities {names!r}"
        )
    _validate_text(config)
    for key in ("rows_per_shard", "unit_size", "batch_size"):
        if getattr(config.output, key) < 1:
            raise ConfigError(f"output.{key}={getattr(config.output, key)} must be >= 1")
    if config.run.procs < 1 or config.run.workers_per_gpu < 0:
        raise ConfigError(f"run.procs={config.run.procs} must be >= 1 and run.workers_per_gpu="
                          f"{config.run.workers_per_gpu} >= 0")
    if config.run.executor not in ("local", "ray"):
        raise ConfigError(f"run.executor={config.run.executor!r}; allowed: local, ray")
    if config.run.max_unit_tries < 1:
        raise ConfigError(f"run.max_unit_tries={config.run.max_unit_tries} must be >= 1")
    if config.run.executor == "ray" and config.run.gpus not in ("", "all"):
        raise ConfigError(f"run.gpus={config.run.gpus!r} picks GPUs of this machine; with run.executor=ray "
                          "use --device cuda (or --gpus all): one worker per GPU of the cluster")
    if not 0.0 <= config.run.max_reject_fraction <= 1.0:
        raise ConfigError(f"run.max_reject_fraction={config.run.max_reject_fraction} must be within [0, 1]")
    if not config.dataset.path:
        raise ConfigError("dataset.path is empty; give the dataset folder or table file(s)")
    if not config.output.root:
        raise ConfigError("output.root is empty; give the cache root folder")
    tokenizer_cls = registry.resolve("tokenizer", config.tokenizer.name)
    tokenizer_cls.check_geometry(config.frames.num_frames, config.frames.height, config.frames.width)
