"""A decoded frame's digest: CRC-32 of its planes' pixel bytes (line padding left out, since FFmpeg leaves it
uninitialised). The probe takes one for every shown frame while decoding from the stream's start; a decode that
seeks proves each frame it hands out by the same digest (frame_reader.py). FFmpeg's software decoders give the same
pixels whatever their thread count, so equal decodes give equal digests."""

from __future__ import annotations

import zlib

import av
import numpy as np

DIGEST_BYTES = 4
_PALETTE_BYTES = 1024  # FFmpeg's pal8 palette: 256 entries of 4 bytes


def _row_bytes(frame: av.VideoFrame, plane_index: int) -> int:
    fmt = frame.format
    plane = frame.planes[plane_index]
    if not fmt.is_planar:  # one packed plane: whole pixels, padding components included
        return -(-plane.width * fmt.padded_bits_per_pixel // 8)
    components = [c for c in fmt.components if c.plane == plane_index]
    return plane.width * sum(-(-c.bits // 8) for c in components)


def frame_digest(frame: av.VideoFrame) -> bytes | None:
    """4 bytes identifying the frame's pixels, or None for a layout whose bytes are not known here (bit-packed
    formats such as monow)."""
    fmt = frame.format
    if fmt.is_bit_stream or fmt.is_bayer:
        return None
    crc = 0
    for index, plane in enumerate(frame.planes):
        buffer = np.frombuffer(plane, np.uint8)
        if fmt.has_palette and index == 1:
            crc = zlib.crc32(buffer[:_PALETTE_BYTES].tobytes(), crc)
            continue
        row_bytes = _row_bytes(frame, index)
        if row_bytes < 1 or row_bytes > plane.line_size:
            return None
        rows = buffer[: plane.line_size * plane.height].reshape(plane.height, plane.line_size)[:, :row_bytes]
        crc = zlib.crc32(np.ascontiguousarray(rows), crc)
    return crc.to_bytes(DIGEST_BYTES, "big")
