"""The build configuration: typed sections, presets, parsing and the checks that need no backend (load_config, in
config/loading/, runs them and the backends' own)."""

from .raw_video_sections import AudioConfig, CaptionsConfig, DedupConfig, SegmentsConfig
from .schema import (
                     MODALITIES,
                     BuildConfig,
                     ConditioningConfig,
                     DatasetConfig,
                     DepthConfig,
                     FramesConfig,
                     MaskConfig,
                     ModalitiesConfig,
                     OutputConfig,
                     RunConfig,
                     TextConfig,
                     TokenizerConfig,
                     target_fps,
                     window_step,
)

__all__ = [
    "MODALITIES",
    "AudioConfig",
    "BuildConfig",
    "CaptionsConfig",
    "ConditioningConfig",
    "DatasetConfig",
    "DedupConfig",
    "DepthConfig",
    "FramesConfig",
    "MaskConfig",
    "ModalitiesConfig",
    "OutputConfig",
    "RunConfig",
    "SegmentsConfig",
    "TextConfig",
    "TokenizerConfig",
    "target_fps",
    "window_step",
]
