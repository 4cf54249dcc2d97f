"""Previews of what a cache holds: K samples decoded next to their source frames, as an mp4 and a PNG sheet.

Layout (docs/stats.md): in the mp4, one tile per sample and frame = for each modality, source | reconstruction,
side by side, the K samples' tiles stacked vertically, frame by frame, at the rate the frames were taken at, and
in a cache with sound one audio track per sample (preview_sound.py). The PNG is the labelled contact sheet of
preview_sheet.py: per sample and modality, source frames above their reconstruction, a few frames across.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import torch

from ..cache.layout import PREVIEW_FOLDER, RUN_RECORDS_DIR
from ..cache.rows import manifest_rows
from ..cache.whole_read import read_whole
from ..config import target_fps
from ..errors import ConfigError, SampleRejected
from ..io import atomic_path
from ..progress import Progress
from ..sinks.dispatch import local_hdf5_cache
from ..sinks.hdf5.structure import check_cache_structure
from ..tokenizers.base import pixels_to_input
from ..verification.deep import spot_indices
from ..verification.deep_checks import stored_row
from ..verification.reencode import Overrides, SampleFinder, load_recorded_tokenizer, recorded_config, recorded_pixels
from .preview_sheet import SheetSample, contact_sheet
from .preview_sound import Sound, add_sound_track, mux_sound, stored_sound

GAP = 4  # pixels of mid grey between tiles
GREY = 128


@dataclass
class Preview:
    video: Path
    sheet: Path
    dataset_indices: list[int]


def to_uint8(video: torch.Tensor) -> np.ndarray:
    """[3,T,H,W] in [-1,1] -> uint8 [T,H,W,3] (values outside [-1,1] clamp)."""
    scaled = (video.detach().cpu().float().clamp(-1.0, 1.0) + 1.0) * 127.5
    return scaled.round().to(torch.uint8).permute(1, 2, 3, 0).numpy()


def _join(images: list[np.ndarray], axis: int) -> np.ndarray:
    """Concatenate along `axis` (-2: side by side, -3: top to bottom) with grey gaps between."""
    shape = list(images[0].shape)
    shape[axis] = GAP
    gap = np.full(shape, GREY, np.uint8)
    return np.concatenate([part for image in images for part in (image, gap)][:-1], axis=axis)


def sample_tiles(source: dict[str, np.ndarray], decoded: dict[str, np.ndarray]) -> np.ndarray:
    """uint8 [T, H, W_tile, 3]: per modality source | reconstruction, modalities left to right."""
    frames = source[next(iter(source))].shape[0]
    return np.stack([_join([image for name in source for image in (source[name][t], decoded[name][t])], -2)
                     for t in range(frames)])


def write_mp4(path: Path, frames: np.ndarray, fps: float, sounds: Sequence[Sound] = ()) -> Path:
    """H.264 (yuv420p needs even sizes: odd edges are padded with grey), and a track for each of `sounds`."""
    t, h, w, _ = frames.shape
    padded = np.full((t, h + h % 2, w + w % 2, 3), GREY, np.uint8)
    padded[:, :h, :w] = frames
    with atomic_path(path) as tmp:
        with av.open(str(tmp), "w", format="mp4") as container:
            stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
            stream.width, stream.height, stream.pix_fmt = padded.shape[2], padded.shape[1], "yuv420p"
            stream.options = {"crf": "16", "preset": "veryfast"}
            tracks = [add_sound_track(container, sound) for sound in sounds]
            for frame in padded:
                container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
            container.mux(stream.encode())
            for track, sound in zip(tracks, sounds):
                mux_sound(container, track, sound)
    return path


def preview(root: str | Path, samples: int = 4, out: Path | None = None, overrides: Overrides = Overrides(),
            indices: list[int] | None = None,
            progress: Progress | None = None) -> Preview:
    """Decode `samples` samples spread over the cache (or `indices`) next to their source frames; write
    preview.mp4 and preview.png into `out` (default ROOT/build/preview). progress("decode", samples) returns
    the function advanced by 1 per sample decoded."""
    root = local_hdf5_cache(root, "preview")
    # one whole cache, even while a build swaps a new one in (read again when the swap cut the read short); the
    # build's records, which say where the sources are, stay at the root
    return read_whole(root, lambda published: _preview(root, published, samples, out, overrides, indices, progress))


def _preview(root: Path, published: Path, samples: int, out: Path | None, overrides: Overrides,
             indices: list[int] | None, progress: Progress | None) -> Preview:
    """preview of the cache at `root`, its rows read from `published` (cache/whole_read.py)."""
    cache_config = check_cache_structure(published)
    config = recorded_config(root, overrides)
    if indices is None and samples < 1:
        raise ConfigError(f"--samples {samples}: preview at least one sample")
    wanted = set(indices) if indices is not None else set(spot_indices(cache_config.num_samples, samples))
    rows = manifest_rows(published, lambda row: row.dataset_index in wanted)
    if not rows:
        raise ConfigError(f"no samples to preview: dataset_index {sorted(wanted)} not in {root}")
    tokenizer = load_recorded_tokenizer(config, cache_config)
    finder = SampleFinder(root, config, reread=bool(overrides.dataset))
    channels = {m.name: m.channels for m in cache_config.latent.modalities}
    sound = cache_config.audio
    tiles, sheet_samples, sounds = [], [], []
    advance = progress("decode", len(rows)) if progress else (lambda n: None)
    for row in rows:
        try:
            pixels, _ = recorded_pixels(row, finder.sample(row), config)
        except SampleRejected as error:
            raise ConfigError(f"dataset_index {row.dataset_index}: cannot read its sources ({error}); pass the "
                              "dataset's location with --dataset") from None
        latent = torch.from_numpy(stored_row(published, row, cache_config.latent.dataset).astype(np.float32))
        source, decoded = {}, {}
        for name, frames in pixels.modalities.items():
            lo, hi = channels[name]
            source[name] = to_uint8(pixels_to_input(frames, "cpu"))
            with torch.inference_mode():
                decoded[name] = to_uint8(tokenizer.decode(latent[None, lo:hi].to(tokenizer.device))[0])
        tiles.append(sample_tiles(source, decoded))
        sheet_samples.append(SheetSample(row.dataset_index, row.sample_id, row.frame_indices, source, decoded))
        if sound is not None:
            sounds.append(stored_sound(published, row, sound.sample_rate))
        advance(1)
    # the frames' own rate, so that they play as long as their window (and its sound) lasts: a target fps, or
    # at the source rate the first sample's that records one
    fps = target_fps(config.frames) or next((row.source_fps for row in rows if row.source_fps), 8.0)
    folder = Path(out) if out is not None else root / RUN_RECORDS_DIR / PREVIEW_FOLDER
    video = write_mp4(folder / "preview.mp4", _join(tiles, -3), float(fps), sounds)
    sheet = folder / "preview.png"
    with atomic_path(sheet) as tmp:
        contact_sheet(sheet_samples).save(tmp, format="PNG")
    return Preview(video, sheet, [row.dataset_index for row in rows])
