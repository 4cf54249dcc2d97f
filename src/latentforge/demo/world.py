"""A small deterministic world: clips of moving shapes with exact per-pixel masks and depth.

Saved like a perception dataset's sources: H.264 mp4 for RGB, a folder of PNG id maps per clip for masks, an .npz of
float depth per clip, and a CSV table with id, video, caption, mask and depth columns. One clip is too short
on purpose, so every demo build also shows a reject.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
from PIL import Image

COLOURS = {"red": (220, 50, 40), "blue": (40, 80, 220), "yellow": (235, 200, 40), "green": (40, 170, 70)}
SHAPES = ("circle", "square")
BACKGROUND_DEPTH = (6.0, 12.0)  # metres at the bottom and top rows of the ground plane


@dataclass(frozen=True)
class Thing:
    shape: str
    colour: str
    radius: float
    start: tuple[float, float]
    velocity: tuple[float, float]  # pixels per frame
    depth: float  # metres; smaller is nearer and occludes


def _things(rng: np.random.Generator, width: int, height: int) -> list[Thing]:
    things = []
    for _ in range(int(rng.integers(1, 4))):
        things.append(
            Thing(
                shape=str(rng.choice(SHAPES)),
                colour=str(rng.choice(list(COLOURS))),
                radius=float(rng.uniform(0.12, 0.22) * height),
                start=(float(rng.uniform(0.2, 0.8) * width), float(rng.uniform(0.3, 0.7) * height)),
                velocity=(float(rng.uniform(-2.5, 2.5)), float(rng.uniform(-1.0, 1.0))),
                depth=float(rng.uniform(1.5, 5.0)),
            )
        )
    return things


def caption_for(things: list[Thing]) -> str:
    parts = []
    for thing in things:
        direction = "right" if thing.velocity[0] > 0 else "left"
        parts.append(f"a {thing.colour} {thing.shape} moving {direction}")
    return " and ".join(parts) + " in front of a sky gradient"


def render(things: list[Thing], t: int, width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RGB uint8 [H,W,3], mask ids uint8 [H,W] (0 = background, i+1 = thing i), depth float32 [H,W]."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    rgb = np.empty((height, width, 3), np.float32)
    rgb[..., 0] = 90 + 100 * yy / height
    rgb[..., 1] = 120 + 60 * xx / width
    rgb[..., 2] = 200 - 80 * yy / height
    near, far = BACKGROUND_DEPTH
    depth = far + (near - far) * yy / (height - 1)
    mask = np.zeros((height, width), np.uint8)
    for i in sorted(range(len(things)), key=lambda k: -things[k].depth):  # far to near: painter's order
        thing = things[i]
        cx, cy = thing.start[0] + thing.velocity[0] * t, thing.start[1] + thing.velocity[1] * t
        if thing.shape == "circle":
            inside = (xx - cx) ** 2 + (yy - cy) ** 2 <= thing.radius**2
        else:
            inside = (np.abs(xx - cx) <= thing.radius) & (np.abs(yy - cy) <= thing.radius)
        shade = 0.85 + 0.15 * np.cos((xx - cx) / thing.radius)  # a little texture for the tokenizer to keep
        rgb[inside] = np.array(COLOURS[thing.colour], np.float32) * shade[inside, None]
        mask[inside] = i + 1
        depth[inside] = thing.depth
    return np.clip(rgb + 0.5, 0, 255).astype(np.uint8), mask, depth.astype(np.float32)


def write_mp4(path: Path, frames: list[np.ndarray], fps: int) -> None:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        # The demo's cache must be the same bytes on every run: with x264's macroblock-tree lookahead on, the
        # same frames encoded twice in one process (torch imported) came out different, even on one thread.
        stream.options = {"crf": "12", "preset": "veryfast", "threads": "1", "x264-params": "mbtree=0"}
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def make_world(folder: Path, clips: int = 10, width: int = 160, height: int = 96, fps: int = 24, seed: int = 0) -> Path:
    """Write the world under `folder` and return the CSV table that lists it."""
    folder = Path(folder)
    for sub in ("videos", "masks", "depth"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(clips):
        name = f"clip_{index:03d}"
        things = _things(rng, width, height)
        num_frames = 6 if index == clips - 1 else int(rng.integers(20, 33))  # the last clip is too short
        rendered = [render(things, t, width, height) for t in range(num_frames)]
        write_mp4(folder / "videos" / f"{name}.mp4", [r[0] for r in rendered], fps)
        mask_dir = folder / "masks" / name
        mask_dir.mkdir(exist_ok=True)
        for t, (_, mask, _) in enumerate(rendered):
            Image.fromarray(mask).save(mask_dir / f"{t:05d}.png")
        np.savez(folder / "depth" / f"{name}.npz", depth=np.stack([r[2] for r in rendered]))
        rows.append(
            {
                "id": name,
                "video": f"videos/{name}.mp4",
                "caption": caption_for(things),
                "mask": f"masks/{name}",
                "depth": f"depth/{name}.npz",
                "objects": len(things),
            }
        )
    table = folder / "samples.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return table
