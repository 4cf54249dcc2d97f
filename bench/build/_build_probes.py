"""In-process measurements of bench/build/build.py: pure encode, T5 with and without prompt dedup, CPU decode cost.

Each uses the library's own functions on the same config the builds use, so the numbers are comparable:
pure encode = the build's tokenizer, batch and precision on pre-decoded batches already on the device;
CPU cost = the build's decode path for one sample, timed alone with process CPU time (all threads).
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from typing import Any, Callable

import numpy as np
import torch
from _device_resize_probe import device_resize_cost
from av.video.reformatter import Interpolation

from latentforge import registry
from latentforge.config import BuildConfig
from latentforge.decode import pyav as decode_pyav
from latentforge.decode.frame_reader import decode_frames
from latentforge.decode.nvdec import decode_rgb_nvdec, with_nvdec
from latentforge.decode.yuv_capture import decode_yuv
from latentforge.pipeline.plan import plan_samples
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.text.prompt_cache import PromptCache
from latentforge.tokenizers.base import frames_to_input, pixels_to_input


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _first_probed(config: BuildConfig, count: int):
    samples, _ = plan_samples(config)
    return [(s, probe_sample(s, config)) for s in samples[:count]]


def pure_encode(config: BuildConfig, device: str, batches: int) -> dict[str, Any]:
    """Seconds per batch of each modality; samples/s for all modalities and for RGB alone. The first batch
    (compile, cudnn autotune) is not timed."""
    dev = torch.device(device)
    tokenizer = registry.resolve("tokenizer", config.tokenizer.name).from_config(config.tokenizer, dev)
    batch = config.output.batch_size
    pixels = [load_sample_pixels(s, p, config) for s, p in _first_probed(config, batch)]
    on_device = {name: frames_to_input([px.modalities[name] for px in pixels], dev)
                 for name in config.modalities.names}
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    seconds: dict[str, list[float]] = {name: [] for name in on_device}
    launches: dict[str, list[float]] = {name: [] for name in on_device}  # until encode returns, before the wait
    for repeat in range(batches + 1):
        for name, frames in on_device.items():
            _sync(dev)
            started = time.perf_counter()
            with torch.inference_mode():
                tokenizer.encode(frames)
            launched = time.perf_counter()
            _sync(dev)
            if repeat:
                seconds[name].append(time.perf_counter() - started)
                launches[name].append(launched - started)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    result = {
        "batch": batch, "batches_timed": batches, "seconds_per_batch": median,
        # The host's time to queue one batch's kernels: close to seconds_per_batch, the GPU would wait for it.
        "host_launch_seconds_per_batch": {name: statistics.median(v) for name, v in launches.items()},
        "samples_per_s_all_modalities": batch / sum(median.values()),
        "samples_per_s_rgb": batch / median["rgb"],
        "peak_gpu_gib": torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None,
    }
    del tokenizer, on_device
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return result


def pure_encode_i2v(config: BuildConfig, device: str, batches: int) -> dict[str, Any]:
    """Seconds per batch of an image-to-video build's encode: the clip's latent, then its conditioning (y and the
    image tokens: pipeline/conditioning.py), on one rgb batch already on the device; the first batch untimed."""
    from latentforge.pipeline.conditioning import ConditioningStage

    dev = torch.device(device)
    tokenizer = registry.resolve("tokenizer", config.tokenizer.name).from_config(config.tokenizer, dev)
    stage = ConditioningStage.load(config, tokenizer)
    batch = config.output.batch_size
    pixels = [load_sample_pixels(s, p, config) for s, p in _first_probed(config, batch)]
    frames = frames_to_input([px.modalities["rgb"] for px in pixels], dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    parts: dict[str, list[float]] = {"clip": [], "conditioning": []}
    for repeat in range(batches + 1):
        for name, encode in (("clip", tokenizer.encode), ("conditioning", stage.encode)):
            _sync(dev)
            started = time.perf_counter()
            with torch.inference_mode():
                encode(frames)
            _sync(dev)
            if repeat:
                parts[name].append(time.perf_counter() - started)
    median = {name: statistics.median(values) for name, values in parts.items()}
    result = {"batch": batch, "batches_timed": batches, "precision": config.conditioning.precision,
              "seconds_per_batch": median, "samples_per_s": batch / sum(median.values()),
              "peak_gpu_gib": torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None}
    del tokenizer, stage, frames
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return result


def text_cost(config: BuildConfig, device: str, prompts: list[str], unit_size: int) -> dict[str, Any]:
    """Text-encoder seconds over the same prompt stream, ours against Cosmos' padded call on this machine:
    - reference: every distinct prompt padded to max_length, 16 per call (Cosmos' encode_prompts);
    - per_prompt: every distinct prompt alone at its own length (the encoder's encode_prompts);
    - build: the build's PromptCache over the stream in units (dedup on).
    Also the largest rel-L2 between our rows and the reference's (the same function up to rounding)."""
    dev = torch.device(device)
    encoder = registry.resolve("text", config.text.name).from_config(config.text, dev)
    distinct = list(dict.fromkeys(prompts))
    units = [prompts[i : i + unit_size] for i in range(0, len(prompts), unit_size)]

    def reference() -> list[np.ndarray]:
        rows = []
        with torch.inference_mode():
            for start in range(0, len(distinct), 16):
                tokens = encoder.tokenizer(distinct[start : start + 16], padding="max_length", truncation=True,
                                           max_length=config.text.max_length, return_tensors="pt").to(dev)
                hidden = encoder.model(**tokens).last_hidden_state.float().cpu().numpy()
                rows += [h[:n] for h, n in zip(hidden, tokens["attention_mask"].sum(dim=1).tolist())]
        return rows

    def build() -> None:
        cache = PromptCache(encoder)
        for unit in units:
            cache.encode(unit)

    encoder.encode_prompts(distinct[:4])  # warm-up: kernels, allocator
    reference()
    result: dict[str, Any] = {"prompts": len(prompts), "distinct": len(distinct), "d_model": encoder.embed_dim,
                              "precision": config.text.precision}
    outputs: dict[str, Any] = {}
    for label, fn in (("reference", reference), ("per_prompt", lambda: encoder.encode_prompts(distinct)),
                      ("build", build)):
        _sync(dev)
        started = time.perf_counter()
        outputs[label] = fn()
        _sync(dev)
        result[f"{label}_seconds"] = time.perf_counter() - started
    result["tokens_per_prompt"] = statistics.mean(len(row) for row in outputs["per_prompt"])
    result["reference_s_per_distinct"] = result["reference_seconds"] / len(distinct)
    result["per_prompt_s_per_distinct"] = result["per_prompt_seconds"] / len(distinct)
    result["build_s_per_sample"] = result["build_seconds"] / len(prompts)
    result["speedup_vs_reference"] = result["reference_seconds"] / result["per_prompt_seconds"]
    result["max_rel_l2_vs_reference"] = max(
        float(np.linalg.norm(ours.astype(np.float64) - ref) / max(np.linalg.norm(ref.astype(np.float64)), 1e-30))
        for ours, ref in zip(outputs["per_prompt"], outputs["reference"]))
    encoder = None  # free the model before the caller measures anything else
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return result


def _core_seconds(fn: Callable[[], Any], reps: int) -> tuple[float, float]:
    """Median (CPU core-seconds of this process, all threads; wall seconds) of fn()."""
    cpu, wall = [], []
    for _ in range(reps):
        c, w = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


@contextlib.contextmanager
def swscale_flags(flags: Interpolation):
    """The build's own decode path with other swscale flags: to_rgb24 reads the module constant per call."""
    saved = decode_pyav.SWSCALE_FLAGS
    decode_pyav.SWSCALE_FLAGS = flags
    try:
        yield
    finally:
        decode_pyav.SWSCALE_FLAGS = saved


def cpu_decode_cost(config: BuildConfig, reps: int, device: str) -> dict[str, Any]:
    """Core-seconds of one sample's CPU work: the build's RGB path (BITEXACT swscale; the build normalises on
    the GPU) with and without a CPU normalise, the same path with other swscale flags, decode alone, the
    frames.resize_backend=device worker side (decode + plane copy; its device side timed on `device`), and a
    sample with each modality as a decode worker loads it."""
    sample, probe = _first_probed(config, 1)[0]
    path, info = sample.entry.video, probe.info
    indices = list(probe.window.indices)

    threads = config.run.decode_threads

    def decode_only() -> None:
        for _ in decode_frames(path, info, indices, sample.sample_id, threads=threads):
            pass

    def build_rgb(flags: Interpolation | None = None, threads: int = threads) -> np.ndarray:
        with swscale_flags(decode_pyav.SWSCALE_FLAGS if flags is None else flags):
            return decode_pyav.decode_rgb(path, info, indices, probe.plan, config.frames, sample.sample_id,
                                          threads=threads)

    def modality(name: str) -> Callable[[], Any]:
        cfg = dataclasses.replace(config, modalities=dataclasses.replace(config.modalities, names=["rgb", name]))
        return lambda: load_sample_pixels(sample, probe, cfg)

    exact = decode_pyav.SWSCALE_FLAGS
    no_bitexact = exact & ~Interpolation.BITEXACT
    rows = {
        "decode only (no colour conversion)": decode_only,
        "build path: decode + swscale resize (BITEXACT); normalise on GPU": build_rgb,
        "build path with FFmpeg's thread choice (run.decode_threads=0)": lambda: build_rgb(threads=0),
        "build path + normalise on CPU (256-entry table)": lambda: pixels_to_input(build_rgb(), "cpu"),
        "swscale without BITEXACT": lambda: build_rgb(no_bitexact),
        "swscale without BITEXACT + normalise on CPU": lambda: pixels_to_input(build_rgb(no_bitexact), "cpu"),
        "swscale filter only (no ACCURATE_RND, FULL_CHR_H_INT, BITEXACT)": lambda: build_rgb(Interpolation(0)),
        "full perception sample as a decode worker does (rgb+mask+depth)":
            lambda: load_sample_pixels(sample, probe, config),
    }
    nvdec_used = []  # the row says which decoder ran: where NVDEC cannot, it times the CPU fallback
    nvdec_or_cpu = dataclasses.replace(config.frames, nvdec_fallback="cpu")
    rows["NVDEC decode + swscale resize (frames.decoder=nvdec)"] = lambda: nvdec_used.append(
        decode_rgb_nvdec(path, info, indices, probe.plan, nvdec_or_cpu, sample.sample_id, threads=threads)[1])
    device_frames = dataclasses.replace(config.frames, resize_backend="device", nvdec_fallback="cpu")

    def yuv(hwaccel=None):
        return decode_yuv(path, info, indices, probe.plan, device_frames, sample.sample_id, hwaccel, threads)

    rows["cpu decode + device resize: worker side (decode + plane copy)"] = yuv
    nvdec_yuv_used = []
    rows["NVDEC decode + device resize: worker side (NVDEC + plane copy)"] = lambda: nvdec_yuv_used.append(
        with_nvdec(yuv, device_frames, path, sample.sample_id)[1])
    if len(config.modalities.names) > 1:
        rows["rgb + mask (PNG folder) sample"] = modality("mask")
        rows["rgb + depth (NPZ) sample"] = modality("depth")
    with torch.inference_mode():
        measured = {label: _core_seconds(fn, reps) for label, fn in rows.items()}
    return {
        "clip": {"source": f"{info.width}x{info.height}", "frames": len(indices),
                 "output": f"{config.frames.height}x{config.frames.width}", "filter": config.frames.resize_filter},
        "torch_threads": torch.get_num_threads(), "decode_threads": threads,
        "nvdec_decoder_used": nvdec_used[-1] if nvdec_used else None,  # "nvdec", or why it fell back
        "nvdec_device_resize_decoder_used": nvdec_yuv_used[-1] if nvdec_yuv_used else None,
        "device_resize": device_resize_cost(config, sample, probe, device, reps),
        "rows": [{"path": label, "core_s": c, "wall_s": w} for label, (c, w) in measured.items()],
    }
