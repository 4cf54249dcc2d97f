"""NVDEC decoding through FFmpeg's CUDA hwaccel (the decoder PyAV's wheels carry).

`frames.decoder: nvdec` decodes on the GPU's video engine; frames come back to host memory and go through
the same colour conversion and resize as CPU decoding (with `frames.resize_backend: device`, they travel on as
NV12 planes to the encoder's device). Decoding H.264/HEVC is exactly specified, so a
conforming hardware decoder gives the same pixels as FFmpeg's software decoder for 8-bit 4:2:0 streams. On any
error (no GPU or driver, an unsupported profile such as 10-bit 4:4:4, a broken file) the sample is rejected, or,
with `frames.nvdec_fallback: cpu`, decoded on the CPU; the manifest row records which decoder ran. Measured
on an H200: docs/benchmarks/builds.md.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import numpy as np
from av.codec import Codec
from av.codec.hwaccel import HWAccel

from ..config import FramesConfig
from ..errors import SampleRejected
from ..records import VideoInfo
from .pyav import decode_rgb
from .resize import ResizeGeometry

Frames = TypeVar("Frames")
# The CUDA context options of every decode: the GPU's primary context. FFmpeg needs it inactive or made with its own
# flags, so a process where torch already uses the GPU (inline decode) gets a context per clip instead.
_PRIMARY_CONTEXT = {"primary_ctx": "1"}
_held: list[HWAccel] = []


@functools.cache
def _context_options() -> dict[str, str]:
    """Retain the GPU's primary context for the life of this process (a decode worker) and return the options that
    attach each clip's decoder to it: creating a CUDA context per clip cost about 0.1 core-s. Where that fails,
    {}: each decoder creates its own context, as FFmpeg does by default."""
    try:
        _held.append(HWAccel(device_type="cuda", options=_PRIMARY_CONTEXT).create(Codec("h264", "r")))
    except Exception:  # noqa: BLE001 - no GPU, or the primary context is torch's: decode as FFmpeg does by default
        return {}
    return _PRIMARY_CONTEXT


def nvdec_accel() -> HWAccel:
    """The hwaccel an NVDEC decode opens its file with: CUDA, no silent software fallback, the held context."""
    return HWAccel(device_type="cuda", allow_software_fallback=False, options=_context_options())


def with_nvdec(decode: Callable[[HWAccel | None], Frames], frames_cfg: FramesConfig, path: str, sample_id: str
               ) -> tuple[Frames, str]:
    """(decode(NVDEC), "nvdec"), or where NVDEC fails: (decode(None) on the CPU, "cpu (nvdec failed: <error>)")
    with frames_cfg.nvdec_fallback=cpu, else the sample is rejected."""
    try:
        return decode(nvdec_accel()), "nvdec"
    except Exception as error:  # noqa: BLE001 - any failure (no GPU, unsupported profile): reject or use the CPU
        # Only the error's kind goes into the (checksummed) manifest: messages can hold paths. Our decode
        # wraps FFmpeg's errors as rejects; the FFmpeg error underneath is the one that says why.
        cause = error.__context__ if isinstance(error, SampleRejected) and error.__context__ else error
        reason = type(cause).__name__
        if frames_cfg.nvdec_fallback != "cpu":
            raise SampleRejected(
                "decode_error", sample_id,
                f"{path}: NVDEC cannot decode it ({reason}: {cause}); frames.nvdec_fallback=cpu decodes such videos on "
                "the CPU (the cache then mixes decoders, each row records its own), or use frames.decoder=cpu",
            ) from None
        return decode(None), f"cpu (nvdec failed: {reason})"


def decode_rgb_nvdec(
    path: str, info: VideoInfo, indices: list[int], plan: ResizeGeometry, frames_cfg: FramesConfig, sample_id: str,
    threads: int = 0,
) -> tuple[np.ndarray, str]:
    """(uint8 [T, out_h, out_w, 3], the decoder that produced it: "nvdec" or "cpu (nvdec failed: <error>)").
    When NVDEC fails and frames_cfg.nvdec_fallback is "reject", the sample is rejected instead."""
    return with_nvdec(lambda accel: decode_rgb(path, info, indices, plan, frames_cfg, sample_id, accel, threads),
                      frames_cfg, path, sample_id)
