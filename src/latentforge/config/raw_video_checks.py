"""The checks of the sections that turn raw video into training clips, none of which needs a model or data:
segments (shots and quality), captions, near-duplicate removal (dedup) and audio."""

from __future__ import annotations

from pathlib import Path

from .. import registry
from ..errors import ConfigError
from .raw_video_sections import CAPTION_MODES, CAPTION_TEMPLATES, SegmentsConfig
from .schema import BuildConfig


def validate_raw_video_sections(config: BuildConfig) -> None:
    _segments(config)
    _captions(config)
    _dedup(config)
    _audio(config)


SHOT_DETECTORS = ("none", "content", "adaptive", "transnetv2")
SCENEDETECT_DETECTORS = ("content", "adaptive")


def _segments(config: BuildConfig) -> None:
    """segments: the detector, its numbers, and the keys it does not combine with. The TransNetV2 weights file
    itself is read by the pre-flight (builder/preflight.py)."""
    segments = config.segments
    if segments.detect not in SHOT_DETECTORS:
        raise ConfigError(f"segments.detect={segments.detect!r} is not allowed; allowed: {', '.join(SHOT_DETECTORS)}")
    if segments.threshold is not None and segments.threshold <= 0:
        raise ConfigError(f"segments.threshold={segments.threshold} must be > 0 (unset: the detector's default)")
    _transnetv2(segments)
    for key, least in (("min_shot_frames", 1), ("margin_frames", 0), ("analysis_width", 16), ("dissolve_frames", 0)):
        if getattr(segments, key) < least:
            raise ConfigError(f"segments.{key}={getattr(segments, key)} must be >= {least}")
    if segments.dissolve_frames == 1:
        raise ConfigError("segments.dissolve_frames=1 compares neighbouring frames, which the detector already does; "
                          "give 0 (hard cuts only) or >= 2")
    if segments.min_motion is not None and segments.min_motion < 0:
        raise ConfigError(f"segments.min_motion={segments.min_motion} must be >= 0 (a mean frame difference, 0..255)")
    fraction = segments.max_black_fraction
    if fraction is not None and not 0.0 <= fraction <= 1.0:
        raise ConfigError(f"segments.max_black_fraction={fraction} must be within [0, 1]")
    if segments.detect in SCENEDETECT_DETECTORS:
        try:
            import scenedetect  # noqa: F401
        except ImportError:
            raise ConfigError(f"segments.detect={segments.detect} needs PySceneDetect; install it with "
                              "pip install 'latentforge[scenes]'") from None
    if config.frames.buckets and segments != type(segments)():
        raise ConfigError("segments places windows of one shape inside shots, but frames.buckets gives several; "
                          "build one shape (frames.num_frames/height/width) or leave the segments keys unset")


def _transnetv2(segments: SegmentsConfig) -> None:
    """detect=transnetv2 needs its weights (latentforge ships and downloads none); its threshold is a probability.
    The weights keys mean nothing to another detector, so they are refused there rather than ignored."""
    if segments.detect != "transnetv2":
        for key in ("transnetv2_weights", "transnetv2_sha256"):
            if getattr(segments, key) is not None:
                raise ConfigError(f"segments.{key} is read only by segments.detect=transnetv2, but detect is "
                                  f"{segments.detect}; set segments.detect=transnetv2 or leave segments.{key} unset")
        return
    if not segments.transnetv2_weights:
        raise ConfigError("segments.detect=transnetv2 needs segments.transnetv2_weights: the path of the PyTorch state "
                          "dict converted from the official TensorFlow weights (github.com/soCzech/TransNetV2, "
                          "inference-pytorch/convert_weights.py writes transnetv2-pytorch-weights.pth); latentforge "
                          "downloads none")
    if segments.threshold is not None and not segments.threshold < 1:
        raise ConfigError(f"segments.threshold={segments.threshold} must be below 1 for transnetv2: it is the "
                          "probability above which a frame is a transition (unset: 0.5)")


def _audio(config: BuildConfig) -> None:
    audio = config.audio
    if not 1000 <= audio.sample_rate <= 384000:
        raise ConfigError(f"audio.sample_rate={audio.sample_rate}; give a rate in Hz from 1000 to 384000 (16000 is "
                          "LTX-2's)")
    if audio.channels not in (1, 2):
        raise ConfigError(f"audio.channels={audio.channels}; allowed: 1 (mono) or 2 (stereo)")
    if audio.max_seconds is not None and audio.max_seconds <= 0:
        raise ConfigError(f"audio.max_seconds={audio.max_seconds} must be > 0 (or unset with a target frames.fps)")
    if audio.enabled and config.frames.fps == "source" and audio.max_seconds is None:
        raise ConfigError("audio.enabled with frames.fps=source needs audio.max_seconds: windows then last "
                          "num_frames / each video's own rate, and the cache stores every window's sound at one "
                          "length; set audio.max_seconds (e.g. 4) or a target frames.fps")
    if audio.tokenizer != "none" and not audio.enabled:
        raise ConfigError(f"audio.tokenizer={audio.tokenizer} encodes each window's sound, which needs "
                          "audio.enabled=true; enable it or set audio.tokenizer=none")


def _dedup(config: BuildConfig) -> None:
    """dedup: the threshold is a cosine similarity a near duplicate reaches, the numbers are counts; enabled needs
    the CLIP checkpoint. Checked whether enabled or not, so a mistyped value fails now, not once it is switched on."""
    dedup = config.dedup
    if not 0.0 < dedup.threshold <= 1.0:  # also refuses NaN
        raise ConfigError(f"dedup.threshold={dedup.threshold} is outside (0, 1]: it is the cosine similarity of two "
                          "windows' CLIP embeddings at and above which the later one is a near duplicate (1 keeps "
                          "all but identical windows; 0.95 is the default)")
    for key in ("frames", "batch_size"):
        if getattr(dedup, key) < 1:
            raise ConfigError(f"dedup.{key}={getattr(dedup, key)} must be >= 1")
    if dedup.enabled and not dedup.model:
        raise ConfigError("dedup.enabled=true needs the CLIP image encoder: set dedup.model to a diffusers Wan I2V "
                          "pipeline folder, its image_encoder/ folder, or the official "
                          "models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth")


def _captions(config: BuildConfig) -> None:
    """captions: the mode, the captioner and its model, the numbers; a prompt is a named template or a file."""
    captions = config.captions
    if captions.mode not in CAPTION_MODES:
        raise ConfigError(f"captions.mode={captions.mode!r} is not allowed; allowed: {', '.join(CAPTION_MODES)}")
    if captions.mode == "keep":
        return
    if captions.name not in registry.names("captioner"):
        raise ConfigError(f"captions.name={captions.name!r}; allowed: {', '.join(registry.names('captioner'))}")
    if not captions.model:
        raise ConfigError(f"captions.mode={captions.mode} needs a captioning model: set captions.model to the local "
                          "folder of a Qwen2.5-VL model (config.json, weights, tokenizer and preprocessor files)")
    for key, least in (("frames", 1), ("resolution", 28), ("max_new_tokens", 1), ("batch_size", 1)):
        if getattr(captions, key) < least:
            raise ConfigError(f"captions.{key}={getattr(captions, key)} must be >= {least}")
    if captions.prompt not in CAPTION_TEMPLATES and not Path(captions.prompt).expanduser().is_file():
        raise ConfigError(f"captions.prompt={captions.prompt!r} is neither a named template nor a file; give one of "
                          f"{', '.join(CAPTION_TEMPLATES)}, or the path of a text file holding the prompt")
