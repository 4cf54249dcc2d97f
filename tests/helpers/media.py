"""Writers of tiny test media (H.264/FFV1 via PyAV, PNG via Pillow, npz/npy via numpy).

Other test modules import these; everything is written with third-party encoders, never with latentforge.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from PIL import Image


def pattern_frames(num_frames: int, width: int, height: int, seed: int = 0) -> np.ndarray:
    """uint8 [T, H, W, 3]: smooth colour gradients plus a block whose position and colour change every frame,
    so each frame is distinct and resizing filters give different results."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    frames = np.empty((num_frames, height, width, 3), np.uint8)
    for t in range(num_frames):
        r = 128 + 100 * np.sin(x / 7.0 + t * 0.7)
        g = 128 + 100 * np.cos(y / 5.0 - t * 0.4)
        b = (x * 3 + y * 2 + t * 17) % 256
        frame = np.stack([r, g, b], axis=-1)
        bx, by = (t * 7) % max(1, width - 8), (t * 5) % max(1, height - 8)
        frame[by : by + 8, bx : bx + 8] = rng.integers(0, 256, 3)
        frames[t] = np.clip(frame, 0, 255).astype(np.uint8)
    return frames


def write_video(
    path: Path,
    frames: np.ndarray,
    fps: int | Fraction = 24,
    codec: str = "libx264",
    pix_fmt: str = "yuv420p",
    rotation: int = 0,
    pts_ms: list[int] | None = None,
    colorspace: str | None = None,
    options: dict[str, str] | None = None,
    gop: int | None = None,
    full_range: bool = False,
    sample_aspect_ratio: Fraction | None = None,
) -> Path:
    """Encode [T, H, W, 3] uint8 RGB (or [T, H, W] gray ids when pix_fmt starts with 'gray').

    rotation: display-matrix rotation, counter-clockwise degrees (what a player applies).
    pts_ms: explicit presentation times in milliseconds (variable frame rate), else frame k at k / fps.
    colorspace: tag and convert with 'ITU709' or 'ITU601'; None leaves the stream untagged (BT.601 maths).
    full_range: convert to full-range YUV and tag the stream and frames so (else limited, tagged only with colorspace).
    sample_aspect_ratio: the shape of one stored pixel as shown (H.264 writes it in the stream, MP4 in its pasp box).
    """
    path = Path(path)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.height, stream.width = frames.shape[1], frames.shape[2]
        stream.pix_fmt = pix_fmt
        if codec == "libx264":
            stream.options = {"preset": "veryfast", "crf": "12", **(options or {})}
        if gop is not None:
            stream.codec_context.gop_size = gop
        if pts_ms is not None:
            stream.codec_context.time_base = Fraction(1, 1000)
        if colorspace is not None:
            stream.codec_context.colorspace = {"ITU709": 1, "ITU601": 6}[colorspace]
            stream.codec_context.color_range = 1
        if full_range:
            stream.codec_context.color_range = 2
        if rotation:
            stream.set_display_rotation(rotation)
        if sample_aspect_ratio is not None:
            stream.codec_context.sample_aspect_ratio = sample_aspect_ratio
        for t, image in enumerate(frames):
            if pix_fmt.startswith("gray"):
                frame = av.VideoFrame.from_ndarray(image, format=pix_fmt)
            else:
                frame = av.VideoFrame.from_ndarray(image, format="rgb24")
                frame = frame.reformat(format=pix_fmt, dst_colorspace=colorspace,
                                       dst_color_range="JPEG" if full_range else "MPEG")
                if colorspace is not None:
                    frame.colorspace = stream.codec_context.colorspace
                if full_range:
                    frame.color_range = 2
            if pts_ms is not None:
                frame.pts, frame.time_base = pts_ms[t], Fraction(1, 1000)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def write_png_folder(folder: Path, images: np.ndarray, stem: str = "frame") -> Path:
    """One grayscale PNG per frame, named so that name order is frame order.

    uint8 arrays give 8-bit PNGs, uint16 arrays 16-bit PNGs (Pillow mode I;16)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for t, image in enumerate(images):
        if image.dtype == np.uint16:
            Image.fromarray(image.astype("<u2")).save(folder / f"{stem}_{t:05d}.png")
        else:
            Image.fromarray(image.astype(np.uint8)).save(folder / f"{stem}_{t:05d}.png")
    return folder


def write_depth_npz(path: Path, depth: np.ndarray, name: str = "depth") -> Path:
    np.savez(path, **{name: depth})
    return Path(path)


def write_depth_npy(path: Path, depth: np.ndarray) -> Path:
    np.save(path, depth)
    return Path(path)


def write_ffv1(path: Path, ids: np.ndarray) -> Path:
    """Lossless FFV1 in Matroska: uint8 ids -> gray, uint16 ids -> gray16le."""
    pix_fmt = "gray16le" if ids.dtype == np.uint16 else "gray"
    return write_video(path, ids, codec="ffv1", pix_fmt=pix_fmt)


def write_text_file(path: Path, text: str = "this is not a video\n") -> Path:
    Path(path).write_text(text)
    return Path(path)


def read_png_pillow(path: Path) -> np.ndarray:
    """Reference reader for PNG ids (Pillow), independent of latentforge's PyAV reader."""
    with Image.open(path) as image:
        return np.array(image)
