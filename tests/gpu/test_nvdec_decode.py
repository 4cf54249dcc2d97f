"""frames.decoder=nvdec on a GPU: NVDEC, through the CUDA hwaccel of the FFmpeg inside PyAV, decodes tiny H.264
clips to the pixels of FFmpeg's software decoder.

docs/frames.md and decode/nvdec.py: decoding H.264 is exactly specified, so a conforming decoder gives the same
pixels for 8-bit 4:2:0 streams. The tolerance is therefore none: the planes NVDEC copies back (nv12) hold the
software decoder's (yuv420p) bytes, with the same colour tags, and the RGB frames through swscale are equal.
NVDEC runs with nvdec_fallback=reject and each row must say it ran, so a silent CPU decode cannot pass.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from av.codec import Codec
from av.codec.hwaccel import HWAccel, hwdevices_available

from helpers.media import pattern_frames, write_video
from latentforge.config import BuildConfig, FramesConfig
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.records import Sample, SourceEntry

SOURCES = {  # name: write_video keywords
    "bt601 limited": {},
    "bt709 full range, rotated 90": {"colorspace": "ITU709", "full_range": True, "rotation": 90},
}


@pytest.fixture(scope="module")
def nvdec() -> None:
    """Skip, saying why, where FFmpeg's CUDA hwaccel cannot start (no CUDA build of FFmpeg, no driver for it)."""
    if "cuda" not in hwdevices_available():
        pytest.skip(f"PyAV's FFmpeg has no CUDA hwaccel (it offers {hwdevices_available()})")
    try:
        HWAccel(device_type="cuda").create(Codec("h264", "r"))
    except Exception as error:  # noqa: BLE001 - any failure to open a CUDA device for FFmpeg
        pytest.skip(f"FFmpeg's CUDA hwaccel cannot start here: {type(error).__name__}: {error}")


def config(decoder: str, resize_backend: str) -> BuildConfig:
    built = BuildConfig()
    built.frames = FramesConfig(num_frames=5, height=48, width=80, decoder=decoder, nvdec_fallback="reject",
                                resize_backend=resize_backend)
    return built


def pixels(path, decoder: str, resize_backend: str):
    sample = Sample("clip", 0, SourceEntry(key="clip", video=str(path), video_rel=path.name, caption="a clip"))
    built = config(decoder, resize_backend)
    return load_sample_pixels(sample, probe_sample(sample, built), built)


def as_i420(values: np.ndarray, width: int, height: int) -> np.ndarray:
    """nv12 frames (Y, then interleaved UV rows) rearranged as i420 (Y, U plane, V plane)."""
    luma = width * height
    uv = values[:, luma:].reshape(len(values), -1, 2)
    return np.concatenate([values[:, :luma], uv[..., 0], uv[..., 1]], axis=1)


@pytest.mark.parametrize("name", list(SOURCES))
def test_nvdec_copies_back_the_planes_of_the_software_decoder(nvdec, tmp_path, name):
    path = write_video(tmp_path / "clip.mp4", pattern_frames(9, 160, 96, seed=6), **SOURCES[name])
    software = pixels(path, "cpu", "device")
    hardware = pixels(path, "nvdec", "device")
    assert hardware.provenance["decoder"] == "nvdec"
    cpu_frames, gpu_frames = software.modalities["rgb"], hardware.modalities["rgb"]
    assert (cpu_frames.yuv.layout, gpu_frames.yuv.layout) == ("i420", "nv12")
    assert dataclasses.replace(gpu_frames.yuv, layout="i420") == cpu_frames.yuv  # size, colour tags, plan
    np.testing.assert_array_equal(as_i420(gpu_frames.values, 160, 96), cpu_frames.values)


@pytest.mark.parametrize("name", list(SOURCES))
def test_nvdec_frames_through_swscale_equal_software_decoding(nvdec, tmp_path, name):
    path = write_video(tmp_path / "clip.mp4", pattern_frames(9, 160, 96, seed=7), **SOURCES[name])
    hardware = pixels(path, "nvdec", "swscale")
    assert hardware.provenance["decoder"] == "nvdec"
    software = pixels(path, "cpu", "swscale")
    np.testing.assert_array_equal(hardware.modalities["rgb"].values, software.modalities["rgb"].values)


@pytest.mark.parametrize("resize_backend", ["swscale", "device"])
def test_nvdec_windows_past_a_keyframe_seek_and_equal_software_decoding(nvdec, tmp_path, monkeypatch,
                                                                        resize_backend):
    """A window after the second keyframe goes through the primed, proven seek with NVDEC too (its frames are
    checked by order, not by the probe's digests), and equals the software decoder's window."""
    from latentforge.decode import frame_reader

    path = write_video(tmp_path / "long.mp4", pattern_frames(48, 160, 96, seed=8), gop=12)
    from_start = []
    real = frame_reader._from_start
    monkeypatch.setattr(frame_reader, "_from_start", lambda *args: from_start.append(args[2]) or real(*args))
    sample = Sample("clip", 0, SourceEntry(key="clip", video=str(path), video_rel=path.name, caption="a clip"), 27)
    windows = {}
    for decoder in ("nvdec", "cpu"):
        built = config(decoder, resize_backend)
        windows[decoder] = load_sample_pixels(sample, probe_sample(sample, built), built)
    assert windows["nvdec"].provenance["decoder"] == "nvdec"
    assert windows["nvdec"].provenance["frame_indices"] == [27, 28, 29, 30, 31]
    assert from_start == [], "a window past a keyframe fell back to decoding from the start"
    hardware, software = windows["nvdec"].modalities["rgb"], windows["cpu"].modalities["rgb"]
    if resize_backend == "device":
        np.testing.assert_array_equal(as_i420(hardware.values, 160, 96), software.values)
    else:
        np.testing.assert_array_equal(hardware.values, software.values)
