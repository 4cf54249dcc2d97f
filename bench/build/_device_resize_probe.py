"""bench/build/build.py's cpu phase, `frames.resize_backend: device`: the device's side of one clip (YUV -> RGB, rotate,
resize, crop, pixel table), timed on the probe's device with and without the upload and with the eager steps, and
how far its pixels are from the eager steps' and the swscale and torch backends' on the same frames (uint8
levels)."""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable

import numpy as np
import torch

from latentforge.config import BuildConfig
from latentforge.decode.device_convert import kernels_for, yuv_to_input
from latentforge.decode.pyav import decode_rgb
from latentforge.decode.yuv_capture import decode_yuv
from latentforge.pipeline.probe import ProbeResult
from latentforge.records import Sample
from latentforge.tokenizers.base import DeviceFrames, expand_frames, pixel_table, upload_frames


def _device_seconds(fn: Callable[[], Any], device: torch.device, reps: int) -> float:
    """Median wall seconds of fn() with the device synchronised around it, after one untimed warm-up."""
    seconds = []
    for repeat in range(reps + 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if repeat:
            seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def device_resize_cost(config: BuildConfig, sample: Sample, probe: ProbeResult, device: str, reps: int
                       ) -> dict[str, Any]:
    dev = torch.device(device)
    args = (sample.entry.video, probe.info, list(probe.window.indices), probe.plan)
    yuv = decode_yuv(*args, dataclasses.replace(config.frames, resize_backend="device"), sample.sample_id)
    if dev.type == "cuda":  # the frame slots are page-locked on a GPU, so the upload is DMA as in a build
        yuv = yuv.with_values(torch.from_numpy(yuv.values).pin_memory().numpy())
    resident = DeviceFrames(torch.from_numpy(yuv.values).to(dev), None, yuv.yuv)
    with torch.inference_mode():
        result: dict[str, Any] = {
            "device": str(dev), "layout": yuv.yuv.layout, "yuv_mb": yuv.nbytes / 1e6,
            "upload_and_convert_s": _device_seconds(lambda: expand_frames([upload_frames(yuv, dev)]), dev, reps),
            "convert_s": _device_seconds(lambda: expand_frames([resident]), dev, reps),
        }
        table = pixel_table(dev)
        result["kernels"] = kernels_for(dev) is not None  # Triton kernels (else the eager steps ran above)
        result["convert_eager_s"] = _device_seconds(lambda: yuv_to_input(resident.values, yuv.yuv, table, False),
                                                    dev, reps)
        levels = ((expand_frames([resident])[0] + 1) * 127.5).round().cpu().numpy().astype(int)
        eager = ((yuv_to_input(resident.values, yuv.yuv, table, False) + 1) * 127.5).round().cpu().numpy()
        difference = np.abs(levels - eager.astype(int))
        result["vs_eager"] = {"max_abs": int(difference.max()), "pixels_apart": int((difference > 0).sum())}
    for backend in ("swscale", "torch"):
        frames_cfg = dataclasses.replace(config.frames, resize_backend=backend)
        reference = np.moveaxis(decode_rgb(*args, frames_cfg, sample.sample_id), -1, 0).astype(int)
        difference = np.abs(levels - reference)
        result[f"vs_{backend}"] = {"max_abs": int(difference.max()), "mean_abs": float(difference.mean())}
    return result
