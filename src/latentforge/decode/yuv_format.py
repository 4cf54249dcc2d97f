"""How a sample's 8-bit 4:2:0 frames are laid out and converted to RGB on the device: YuvFormat, with the plane
layouts and colour matrices it names."""

from __future__ import annotations

from dataclasses import dataclass

YUV_LAYOUTS = ("i420", "nv12")  # planes Y, U, V | plane Y, then U and V interleaved (NVDEC's copy-back)
COLOUR_MATRICES = ("bt601", "bt709", "fcc", "smpte240m", "bt2020")


@dataclass(frozen=True)
class YuvFormat:
    """How one sample's 8-bit 4:2:0 frames (`frames.resize_backend: device`) become its RGB frames on the device:
    convert at the coded size with `matrix` and range, rotate, resize to `scaled_size`, keep `crop`."""

    layout: str  # one of YUV_LAYOUTS
    width: int  # coded size, even; chroma planes are height / 2 x width / 2
    height: int
    matrix: str  # one of COLOUR_MATRICES
    full_range: bool  # false: limited (16..235 luma)
    rotation: int  # degrees counter-clockwise to show the frame upright (0/90/180/270)
    scaled_size: tuple[int, int]  # (w, h) of the upright frame after the resize
    crop: tuple[int, int, int, int]  # x0, y0, x1, y1 in scaled pixels (x1, y1 exclusive)
    resize_filter: str  # bilinear | bicubic | area: torch's interpolate mode

    @property
    def chroma_size(self) -> tuple[int, int]:
        """(w, h) of each chroma plane."""
        return self.width // 2, self.height // 2

    @property
    def frame_bytes(self) -> int:
        chroma_w, chroma_h = self.chroma_size
        return self.width * self.height + 2 * chroma_w * chroma_h

    @property
    def out_size(self) -> tuple[int, int]:
        """(w, h) of the output frames."""
        x0, y0, x1, y1 = self.crop
        return x1 - x0, y1 - y0
