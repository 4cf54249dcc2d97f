"""preview.png: the contact sheet a person reads, one block per sample, top to bottom.

A block is a title line (`dataset_index N  sample_id`), a line naming each column's source frame, then for each
modality (rgb, mask, depth, as the cache stores them) a row of source frames above a row of the same frames
decoded from the stored latent, labelled on the left (`rgb` / `source`, `rgb` / `decoded`). The columns are the
frames at SHEET_TIMES of the clip. Frames smaller than MIN_TILE_HEIGHT are enlarged by a whole factor, nearest
neighbour, so every pixel stays a block of one value. The geometry (sheet_geometry) is what tests measure against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

SHEET_TIMES = (0.0, 1 / 3, 2 / 3, 1.0)  # the columns: first frame, a third, two thirds, last
GAP = 4  # pixels between frames, and between a modality's two rows
MODALITY_GAP = 8  # pixels between one modality's rows and the next modality's
SAMPLE_GAP = 16  # pixels between samples
LABEL_WIDTH = 64  # the label column on the left
TITLE_HEIGHT = 16  # the sample's title line
COLUMN_LABEL_HEIGHT = 14  # the line naming each column's source frame
MIN_TILE_HEIGHT = 128  # frames lower than this are enlarged by a whole factor
BACKGROUND = 255
INK = 0


@dataclass(frozen=True)
class SheetSample:
    """One sample's frames as uint8 [T, H, W, 3] per modality, its source and its decoded latent."""

    dataset_index: int
    sample_id: str
    frame_indices: list[int]  # the source frame number of each frame
    source: dict[str, np.ndarray]
    decoded: dict[str, np.ndarray]


@dataclass(frozen=True)
class SheetGeometry:
    """Where everything sits: a frame of sample s, modality m, row r (0 source, 1 decoded), column c has its top-left
    corner at (tile_x(c), tile_y(s, m, r)) and is `tile_height` x `tile_width` pixels (the frame times `zoom`)."""

    columns: list[int]  # the frame (position in the window) of each column
    modalities: int
    samples: int
    zoom: int
    tile_height: int
    tile_width: int

    @property
    def modality_height(self) -> int:
        return 2 * self.tile_height + GAP

    @property
    def sample_height(self) -> int:
        return TITLE_HEIGHT + COLUMN_LABEL_HEIGHT + self.modalities * (self.modality_height + MODALITY_GAP) \
            - MODALITY_GAP

    @property
    def width(self) -> int:
        return LABEL_WIDTH + len(self.columns) * (self.tile_width + GAP) - GAP

    @property
    def height(self) -> int:
        return self.samples * (self.sample_height + SAMPLE_GAP) - SAMPLE_GAP

    def tile_x(self, column: int) -> int:
        return LABEL_WIDTH + column * (self.tile_width + GAP)

    def tile_y(self, sample: int, modality: int, row: int) -> int:
        return (sample * (self.sample_height + SAMPLE_GAP) + TITLE_HEIGHT + COLUMN_LABEL_HEIGHT
                + modality * (self.modality_height + MODALITY_GAP) + row * (self.tile_height + GAP))


def sheet_columns(frames: int) -> list[int]:
    """The frames shown: SHEET_TIMES of a window of `frames` frames, each once."""
    return sorted({round(p * (frames - 1)) for p in SHEET_TIMES})


def sheet_geometry(frames: int, height: int, width: int, modalities: int, samples: int) -> SheetGeometry:
    zoom = max(1, MIN_TILE_HEIGHT // height)
    return SheetGeometry(sheet_columns(frames), modalities, samples, zoom, height * zoom, width * zoom)


def _enlarged(frame: np.ndarray, zoom: int) -> np.ndarray:
    return frame.repeat(zoom, axis=0).repeat(zoom, axis=1)


def contact_sheet(samples: list[SheetSample]) -> Image.Image:
    """The sheet of `samples` (all of one frame count, size and modality list, as in one cache)."""
    first = samples[0]
    names = list(first.source)
    frames, height, width, _ = first.source[names[0]].shape
    geometry = sheet_geometry(frames, height, width, len(names), len(samples))
    canvas = np.full((geometry.height, geometry.width, 3), BACKGROUND, np.uint8)
    for s, sample in enumerate(samples):
        for m, name in enumerate(names):
            for r, frames_of_row in enumerate((sample.source[name], sample.decoded[name])):
                y = geometry.tile_y(s, m, r)
                for c, frame in enumerate(geometry.columns):
                    x = geometry.tile_x(c)
                    canvas[y : y + geometry.tile_height, x : x + geometry.tile_width] = _enlarged(
                        frames_of_row[frame], geometry.zoom)
    image = Image.fromarray(canvas)
    _label(ImageDraw.Draw(image), samples, names, geometry)
    return image


def _label(draw: ImageDraw.ImageDraw, samples: list[SheetSample], names: list[str], geometry: SheetGeometry) -> None:
    font = ImageFont.load_default()
    for s, sample in enumerate(samples):
        top = s * (geometry.sample_height + SAMPLE_GAP)
        draw.text((0, top + 2), f"dataset_index {sample.dataset_index}  {sample.sample_id}", fill=INK, font=font)
        for c, frame in enumerate(geometry.columns):
            draw.text((geometry.tile_x(c), top + TITLE_HEIGHT), f"frame {sample.frame_indices[frame]}", fill=INK,
                      font=font)
        for m, name in enumerate(names):
            for r, what in enumerate(("source", "decoded")):
                y = geometry.tile_y(s, m, r)
                draw.text((0, y), name, fill=INK, font=font)
                draw.text((0, y + 12), what, fill=INK, font=font)
