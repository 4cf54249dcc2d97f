"""Inputs of bench/build/build.py: a perception dataset shaped like seed 000's sources, and random-weight models.

Dataset: `clips` distinct clips rendered by the demo world (moving shapes, exact masks and depth), each saved
as an H.264 mp4 (libx264 ultrafast), a folder of 8-bit PNG id maps and an uncompressed float32 .npz of depth;
a CSV lists `rows` samples that cycle over the clips with their own ids, so a long steady state needs no more
disk than `clips` clips (a 1280x720x96 float32 depth is 354 MB). Clips render in parallel processes.

Models: the Wan2.1 VAE architecture (diffusers AutoencoderKLWan, the Wan2.1 config) with seeded random weights,
saved as a diffusers folder; and either the t5-11b encoder architecture with random bf16 weights built on the
GPU, or the demo's tiny T5. Both tokenizers are generated: no weights can be fetched.
"""

from __future__ import annotations

import csv
import multiprocessing
import shutil
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
from PIL import Image

from latentforge.demo.world import _things, caption_for, render

MASK_IDS = [0, 1, 2, 3]  # the demo world draws at most 3 things: background 0, thing i -> i + 1
# google-t5/t5-11b's encoder: ReLU feed-forward (T5 v1.0), 24 layers, 128 heads of 128, d_ff 65536.
T5_11B = dict(vocab_size=32128, d_model=1024, d_ff=65536, num_layers=24, num_heads=128, d_kv=128,
              feed_forward_proj="relu", pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)


@dataclass(frozen=True)
class DatasetSpec:
    clips: int
    rows: int
    width: int
    height: int
    frames: int
    fps: int = 30
    caption_dup: float = 0.0  # fraction of rows that reuse their clip's caption verbatim (prompt dedup hits)
    # +-grain uniform noise on RGB at crf 20: ~12 Mbps at 1280x720, so decode costs what a camera clip costs
    # (clean renders compress to ~1 Mbps and decode 4x cheaper)
    grain: int = 6
    seed: int = 0
    audio: bool = False  # an AAC stereo 48 kHz track (a chord that changes every second) beside the video


def _render_clip(job: tuple[Path, int, DatasetSpec]) -> str:
    folder, index, spec = job
    rng = np.random.default_rng([spec.seed, index])
    things = _things(rng, spec.width, spec.height)
    name = f"clip_{index:04d}"
    mask_dir = folder / "masks" / name
    mask_dir.mkdir(parents=True, exist_ok=True)
    depth = np.empty((spec.frames, spec.height, spec.width), np.float32)
    with av.open(str(folder / "videos" / f"{name}.mp4"), "w") as container:
        stream = container.add_stream("libx264", rate=spec.fps)
        stream.width, stream.height, stream.pix_fmt = spec.width, spec.height, "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "20"}
        sound = _audio_stream(container) if spec.audio else None
        for t in range(spec.frames):
            rgb, mask, depth[t] = render(things, t, spec.width, spec.height)
            if spec.grain:
                noise = rng.integers(-spec.grain, spec.grain + 1, rgb.shape, dtype=np.int16)
                rgb = np.clip(rgb + noise, 0, 255).astype(np.uint8)
            Image.fromarray(mask).save(mask_dir / f"{t:05d}.png", compress_level=1)
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if sound is not None:
            _mux_audio(container, sound, spec.frames / spec.fps, index)
    np.savez(folder / "depth" / f"{name}.npz", depth=depth)
    return caption_for(things)


def _audio_stream(container, rate: int = 48000):
    stream = container.add_stream("aac", rate=rate)
    stream.layout = "stereo"
    return stream


def _mux_audio(container, stream, seconds: float, index: int) -> None:
    """`seconds` of AAC stereo from t=0: a tone per channel whose pitch changes every second, per clip."""
    from fractions import Fraction

    rate = stream.codec_context.sample_rate
    block = stream.codec_context.frame_size or 1024
    t = np.arange(round(seconds * rate)) / rate
    pitch = 220.0 * (1 + (index + np.floor(t)) % 5 / 4)
    wave = np.stack([0.3 * np.sin(2 * np.pi * pitch * t), 0.3 * np.sin(2 * np.pi * 1.5 * pitch * t)]).astype(np.float32)
    for at in range(0, wave.shape[1], block):
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(wave[:, at:at + block]), format="fltp",
                                           layout="stereo")
        frame.sample_rate, frame.pts, frame.time_base = rate, at, Fraction(1, rate)
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)


def make_dataset(folder: Path, spec: DatasetSpec, processes: int) -> Path:
    """Render the clips (in `processes` processes) and write samples.csv; returns the table path."""
    folder = Path(folder)
    for sub in ("videos", "masks", "depth"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    jobs = [(folder, i, spec) for i in range(spec.clips)]
    if processes > 1:
        with multiprocessing.get_context("spawn").Pool(min(processes, spec.clips)) as pool:
            captions = pool.map(_render_clip, jobs, chunksize=1)
    else:
        captions = [_render_clip(job) for job in jobs]
    rng = np.random.default_rng(spec.seed)
    table = folder / "samples.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "video", "caption", "mask", "depth"])
        writer.writeheader()
        for row in range(spec.rows):
            clip = row % spec.clips
            name = f"clip_{clip:04d}"
            reuse = row >= spec.clips and rng.random() < spec.caption_dup
            caption = captions[clip] if reuse else f"{captions[clip]}, take {row}"
            writer.writerow({"id": f"s{row:06d}", "video": f"videos/{name}.mp4", "caption": caption,
                             "mask": f"masks/{name}", "depth": f"depth/{name}.npz"})
    return table


def _render_long(job: tuple[Path, int, int, int, float, float]) -> str:
    from _long_videos import synthetic_clip

    path, seed, width, height, seconds, shot_seconds = job
    synthetic_clip(path, width, height, seconds, shot_seconds, seed)
    return path.name


def make_long_dataset(folder: Path, videos: int, width: int, height: int, seconds: float, shot_seconds: float,
                      captions: list[str], processes: int) -> Path:
    """`videos` long videos of shots (bench/_common/_long_videos.py), rendered in `processes` processes, and
    long.csv listing each once with a caption from `captions`; returns the table path."""
    (folder / "videos").mkdir(parents=True, exist_ok=True)
    jobs = [(folder / "videos" / f"long{i:04d}.mp4", i, width, height, seconds, shot_seconds) for i in range(videos)]
    if processes > 1 and videos > 1:
        with multiprocessing.get_context("spawn").Pool(min(processes, videos)) as pool:
            pool.map(_render_long, jobs, chunksize=1)
    else:
        for job in jobs:
            _render_long(job)
    table = folder / "long.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "video", "caption"])
        writer.writeheader()
        for i, (path, *_rest) in enumerate(jobs):
            writer.writerow({"id": f"long{i:04d}", "video": f"videos/{path.name}",
                             "caption": captions[i % len(captions)]})
    return table


def make_wan21_vae(folder: Path, seed: int = 0) -> Path:
    """The Wan2.1 VAE (diffusers AutoencoderKLWan defaults = the Wan2.1 config) with random weights, saved."""
    import torch
    from diffusers import AutoencoderKLWan

    torch.manual_seed(seed)
    vae = AutoencoderKLWan(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                           temperal_downsample=[False, True, True]).eval()
    vae.save_pretrained(folder)
    return Path(folder)


def make_text_model(folder: Path, corpus: list[str], device: str, big: bool, layers: int | None = None) -> Path:
    """A T5 encoder folder: tiny (demo) or the t5-11b architecture in bf16 with random weights.

    The tokenizer is the demo's generated Unigram tokenizer either way (trained on `corpus`); the big model
    keeps t5-11b's 32128-row embedding, of which the tokenizer uses the first ids. `layers` shrinks the big
    model for tests of this code path.
    """
    import torch
    from transformers import T5Config, T5EncoderModel

    from latentforge.demo.tiny_text_model import make_tiny_t5
    from latentforge.text.hf_encoder import PROVENANCE_NOTE_FILE

    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    make_tiny_t5(folder, corpus=corpus, vocab_size=2000 if big else 200)
    if not big:
        return folder
    for stale in [*folder.glob("*.safetensors"), folder / "config.json"]:
        stale.unlink()
    config = T5Config(**{**T5_11B, "num_layers": layers or T5_11B["num_layers"]})
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # never materialise 19 GB of fp32 weights
    try:
        with torch.device(device):
            model = T5EncoderModel(config).eval()
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(folder)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    note = (f"text embeddings come from the t5-11b encoder architecture with untrained random bf16 weights "
            f"({config.num_layers} layers, seed 0), built by bench/build/build.py.")
    (folder / PROVENANCE_NOTE_FILE).write_text(note + "\n", encoding="utf-8")
    return folder


def table_captions(table: Path) -> list[str]:
    with open(table, newline="", encoding="utf-8") as handle:
        return [row["caption"] for row in csv.DictReader(handle)]
