"""ModalityFrames: one modality's frames in the compact form decode produces, expanded exactly on the encoder's
device."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .yuv_format import YuvFormat


@dataclass(frozen=True)
class ModalityFrames:
    """One modality's frames in the compact form decode produces; the encoder's device expands them exactly.

    `values` is one of:
    - [T, H, W, 3] uint8 (mapped to [-1, 1] by the 256-entry pixel table) or float32 already in [-1, 1];
    - [T, H, W] uint8/uint16 ids with `palette`, uint8 [N, 3]: frame pixel = palette[id] (masks);
    - [T, H, W] float32 in [-1, 1] without a palette: the value repeated in 3 channels (depth);
    - [T, yuv.frame_bytes] uint8 with `yuv`: each frame's YUV 4:2:0 planes at the source's coded size, converted,
      rotated and resized on the device (decode/device_convert.py).
    The compact forms carry a third (masks, depth) of the bytes from decode workers to the device; the YUV form
    half of the source's RGB, which moves the colour conversion and resize off the decode workers' CPU.
    """

    values: np.ndarray
    palette: np.ndarray | None = None
    yuv: YuvFormat | None = None

    def __post_init__(self) -> None:
        if self.yuv is not None:
            expected = (self.yuv.frame_bytes,)
            if self.values.ndim != 2 or self.values.dtype != np.uint8 or self.values.shape[1:] != expected:
                raise ValueError(f"YUV frames must be uint8 [T, {self.yuv.frame_bytes}], got "
                                 f"{self.values.dtype} {self.values.shape}")
            if self.palette is not None:
                raise ValueError("YUV frames have no palette")
            return
        compact = self.values.ndim == 3
        if not compact and (self.values.ndim != 4 or self.values.shape[-1] != 3):
            raise ValueError(f"frames must be [T, H, W, 3] or [T, H, W], got {self.values.shape}")
        if self.palette is not None and not (compact and self.values.dtype in (np.uint8, np.uint16)):
            raise ValueError("a palette goes with [T, H, W] uint8/uint16 ids")
        if compact and self.palette is None and self.values.dtype != np.float32:
            raise ValueError(f"[T, H, W] frames without a palette must be float32, got {self.values.dtype}")

    @property
    def num_frames(self) -> int:
        return int(self.values.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)

    def head(self, count: int) -> ModalityFrames:
        """The first `count` frames."""
        return ModalityFrames(self.values[:count], self.palette, self.yuv)

    def with_values(self, values: np.ndarray) -> ModalityFrames:
        """The same frames held in another array (a shared-memory copy)."""
        return ModalityFrames(values, self.palette, self.yuv)

    def expanded(self) -> np.ndarray:
        """[T, H, W, 3]: uint8 colours or float32 values, as the tokenizer sees them before the pixel table.
        YUV frames are expanded by the device conversion only (tokenizers.base.frames_to_input)."""
        if self.yuv is not None:
            raise TypeError("YUV frames are converted on the device: use tokenizers.base.frames_to_input")
        if self.palette is not None:
            return np.take(self.palette, self.values, axis=0)
        if self.values.ndim == 3:
            return np.repeat(self.values[..., None], 3, axis=-1)
        return self.values
