"""The build configuration: typed sections, presets, parsing and the checks that run before any model loads."""

from .load import load_config
from .schema import (
                     MODALITIES,
                     BuildConfig,
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
    "BuildConfig",
    "DatasetConfig",
    "DepthConfig",
    "FramesConfig",
    "MaskConfig",
    "ModalitiesConfig",
    "OutputConfig",
    "RunConfig",
    "TextConfig",
    "TokenizerConfig",
    "load_config",
    "target_fps",
    "window_step",
]
