"""The config checks that need no backend, no model and no data: values, choices, keys that go together.

load_config (config/loading/) runs them first, then lets each backend chosen by name check its own part."""

from __future__ import annotations

import os
import re
from typing import Any

from .. import registry
from ..devices import check_device_name
from ..errors import ConfigError
from ..locations import is_url
from .buckets import parse_buckets
from .raw_video_checks import validate_raw_video_sections
from .raw_video_sections import AUDIO_PARTIAL, AUDIO_PRECISIONS, AUDIO_RESAMPLERS
from .schema import (
    CONDITIONING_PRECISIONS,
    IMAGE_LATENTS,
    MODALITIES,
    TEXT_ON_UNKNOWN,
    TEXT_PADDINGS,
    TEXT_STORAGES,
    BuildConfig,
    window_step,
)

AUTO_WORKERS = "auto"

_CHOICES = {
    "dataset.on_missing_caption": ("reject", "empty"),
    "frames.window": ("start", "center", "random"),
    "frames.resize": ("cover_crop", "stretch"),
    "frames.resize_backend": ("swscale", "torch", "device"),
    "frames.decoder": ("cpu", "nvdec"),
    "frames.nvdec_fallback": ("reject", "cpu"),
    "text.source": ("encoder", "pickles", "pickles+encoder"),
    "text.storage": TEXT_STORAGES,
    "text.padding": TEXT_PADDINGS,
    "text.on_unknown": TEXT_ON_UNKNOWN,
    "output.storage_dtype": ("float16", "float32"),
    "modalities.depth.normalize": ("minmax",),
    "conditioning.image_latent": IMAGE_LATENTS,
    "conditioning.precision": CONDITIONING_PRECISIONS,
    "audio.partial": AUDIO_PARTIAL,
    "audio.resampler": AUDIO_RESAMPLERS,
    "audio.precision": AUDIO_PRECISIONS,
}
_FILTERS = {"swscale": ("bilinear", "bicubic", "area", "lanczos"), "torch": ("bilinear", "bicubic", "area"),
            "device": ("bilinear", "bicubic", "area")}
_WINDOWS = re.compile(r"^(one|every \d+)$")


def token_storage_dtype(vocabulary: int) -> str:
    """The dtype of a discrete tokenizer's cache, which output.storage_dtype (float) does not govern: uint16 while
    every id fits (the Cosmos DV vocabulary of 64,000 does), uint32 beyond."""
    return "uint16" if vocabulary <= 1 << 16 else "uint32"


def _get(config: BuildConfig, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def _validate_text(config: BuildConfig) -> None:
    """Text checks, the pickle ones included: a pickles build must be able to write its empty prompt."""
    text = config.text
    if text.max_length < 1:
        raise ConfigError(f"text.max_length={text.max_length} must be >= 1")
    if not 0.0 <= text.max_unknown_fraction <= 1.0:
        raise ConfigError(f"text.max_unknown_fraction={text.max_unknown_fraction} must be within [0, 1]: the "
                          "fraction of a caption's tokens the text encoder's tokenizer does not know")
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


def _validate_buckets(config: BuildConfig) -> None:
    buckets = parse_buckets(config.frames)
    if config.frames.bucket_upscale and not buckets:
        raise ConfigError("frames.bucket_upscale=true lets a sample go to a bucket larger than its picture, but "
                          "frames.buckets is empty; list the buckets, or unset bucket_upscale (a single-shape build "
                          "resizes every source to its shape)")
    if buckets and window_step(config.frames) is not None:
        raise ConfigError(f"frames.windows={config.frames.windows!r} cuts windows of one length, but "
                          "frames.buckets gives several; use frames.windows=one with buckets")


def _validate_conditioning(config: BuildConfig) -> None:
    """The image conditioning's own keys; whether the tokenizer builds the image latent is its class's answer
    (config/loading/backend_checks.py)."""
    conditioning = config.conditioning
    if conditioning.image_embeds != "none":
        allowed = registry.names("image_encoder")
        if conditioning.image_embeds not in allowed:
            raise ConfigError(f"conditioning.image_embeds={conditioning.image_embeds!r}; allowed: none"
                              f"{''.join(', ' + name for name in allowed)}")
        if not conditioning.image_encoder_path:
            raise ConfigError(f"conditioning.image_embeds={conditioning.image_embeds} needs its weights: give "
                              "conditioning.image_encoder_path (a diffusers Wan I2V pipeline folder, its "
                              "image_encoder/ folder, or the official .pth)")
    elif conditioning.image_encoder_path or conditioning.image_encoder_sha256:
        raise ConfigError("conditioning.image_encoder_path/image_encoder_sha256 are set but conditioning.image_embeds"
                          "=none, so no image encoder runs; name the encoder (clip-vit-h14) or drop the path")
    if (conditioning.image_embeds != "none" or conditioning.image_latent != "none") and config.frames.buckets:
        raise ConfigError("conditioning is built for single-shape caches only, but frames.buckets is set; build one "
                          "cache per shape (frames.num_frames/height/width) or set conditioning.image_latent=none "
                          "and conditioning.image_embeds=none")


def _positive_number(text: str) -> bool:
    try:
        return float(text) > 0 and float(text) != float("inf")
    except ValueError:
        return False


def _validate_output(config: BuildConfig) -> None:
    output = config.output
    if output.sink not in registry.names("sink"):
        raise ConfigError(f"output.sink={output.sink!r}; allowed: {', '.join(registry.names('sink'))}")
    _validate_staging_url(output.staging_url, output.root)


def _validate_staging_url(url: str, root: str) -> None:
    """Staged units at a URL: a URL, and outside the cache (a commit owns every object under its root)."""
    if not url:
        return
    if not is_url(url):
        raise ConfigError(f"output.staging_url={url!r} is not a URL; give an fsspec URL such as s3://bucket/prefix "
                          "or file:///shared/path, or leave it empty to stage in the build records folder")
    if root and _within(url, root):
        raise ConfigError(f"output.staging_url={url!r} lies inside output.root={root!r}, whose objects the commit "
                          "owns; give a URL outside the cache")


def _within(url: str, root: str) -> bool:
    """Is `url` the root or under it? A file:// URL is compared with a local root as absolute paths."""
    if url.startswith("file://") and not is_url(root):
        url, root = os.path.abspath(url.removeprefix("file://")), os.path.abspath(root)
    return (url.rstrip("/") + "/").startswith(root.rstrip("/") + "/")


def validate(config: BuildConfig) -> None:
    """Every check that needs no backend; raises ConfigError with the allowed values."""
    if not config.dataset.path:  # first: without it no reader is chosen (dataset.reader=auto stays auto)
        raise ConfigError("dataset.path is empty; give the dataset folder or table file(s) with --dataset")
    for kind, dotted in (("reader", "dataset.reader"), ("executor", "run.executor")):
        if _get(config, dotted) not in registry.names(kind):
            raise ConfigError(f"{dotted}={_get(config, dotted)!r}; allowed: {', '.join(registry.names(kind))}")
    for dotted, allowed in _CHOICES.items():
        value = _get(config, dotted)
        if value not in allowed:
            raise ConfigError(f"{dotted}={value!r} is not allowed; allowed: {', '.join(allowed)}")
    filters = _FILTERS[config.frames.resize_backend]
    if config.frames.resize_filter not in filters:
        raise ConfigError(
            f"frames.resize_filter={config.frames.resize_filter!r} is not available with resize_backend="
            f"{config.frames.resize_backend!r}; allowed: {', '.join(filters)} (or frames.resize_backend=swscale, "
            "which has every filter)"
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
    if config.dataset.limit is not None and config.dataset.limit < 0:
        raise ConfigError(f"dataset.limit={config.dataset.limit} must be >= 0 (the first N samples of the plan; "
                          "leave it unset for all)")
    names = config.modalities.names
    bad = [m for m in names if m not in MODALITIES]
    if bad or not names or len(set(names)) != len(names) or names[0] != "rgb":
        raise ConfigError(
            f"modalities.names={names!r}; allowed: distinct names from {', '.join(MODALITIES)}, rgb first"
        )
    _validate_text(config)
    for key in ("rows_per_shard", "unit_size", "batch_size"):
        if getattr(config.output, key) < 1:
            raise ConfigError(f"output.{key}={getattr(config.output, key)} must be >= 1")
    check_device_name(config.run.device, "run.device")
    if config.run.decode_threads < 0:
        raise ConfigError(f"run.decode_threads={config.run.decode_threads} must be >= 0 (0: FFmpeg's choice)")
    if config.run.procs < 1:
        raise ConfigError(f"run.procs={config.run.procs} must be >= 1")
    parse_workers(config.run.workers_per_gpu)
    parse_workers(config.run.probe_workers, "run.probe_workers", least=1)
    if not 0 <= config.run.metrics_port <= 65535:
        raise ConfigError(f"run.metrics_port={config.run.metrics_port} is not a TCP port; give 1..65535, or 0 "
                          "for no metrics endpoint")
    if not 0.0 <= config.run.max_reject_fraction <= 1.0:
        raise ConfigError(f"run.max_reject_fraction={config.run.max_reject_fraction} must be within [0, 1]")
    if not config.output.root:
        raise ConfigError("output.root is empty; give the cache root folder with --out")
    _validate_output(config)
    _validate_buckets(config)
    _validate_conditioning(config)
    for name in ("mask", "depth"):
        rate = getattr(config.modalities, name).fps
        if rate != "source" and not _positive_number(rate):
            raise ConfigError(f"modalities.{name}.fps={rate!r}; allowed: 'source' (frame i goes with video frame i) "
                              "or the source's frame rate, a positive number")
    validate_raw_video_sections(config)


def parse_workers(setting: str, key: str = "run.workers_per_gpu", least: int = 0) -> int | None:
    """A worker count setting (run.workers_per_gpu, run.probe_workers): None for auto, else the number; ConfigError
    naming the key for anything else."""
    if setting == AUTO_WORKERS:
        return None
    try:
        workers = int(setting)
    except ValueError:
        workers = -1
    if workers < least:
        meaning = " (0 decodes on the encoder thread)" if least == 0 else " (1 probes in the main process)"
        raise ConfigError(f"{key}={setting!r}; allowed: auto, or a whole number >= {least}{meaning}")
    return workers
