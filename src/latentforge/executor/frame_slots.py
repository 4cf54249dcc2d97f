"""Shared-memory slots that carry decoded frames from decode workers to the encoder without pickling them.

A rank creates `count` slots of `slot_bytes` each in one memfd (anonymous shared memory: not bounded by the
size of /dev/shm, which containers often keep small). Its decode workers open the same memory at
/proc/<rank pid>/fd/<fd>. A worker writes a sample's frames into the slot it was handed and returns only
where they lie; the encoder reads them in place. On a GPU the slots are page-locked (cudaHostRegister), so
the copy to the device is DMA that the encoder does not wait for. A slot is free again once the device has
read its frames (pipeline/batch_queue.py marks that point with a CUDA event after the copies).

Pickling a perception sample through the worker pipe cost the encoder's process hundreds of MB of copying
under the GIL per sample; a slot costs it nothing but a few bytes of layout.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch

from ..config import BuildConfig
from ..decode.modality_frames import ModalityFrames
from ..decode.yuv_format import YuvFormat
from ..pipeline.probe import ProbeResult
from ..pipeline.unit_inputs import Unit

_ALIGN = 4096
# Bytes per output pixel of each modality's compact frames, at most: RGB uint8 x 3; masks as 8/16-bit ids or,
# for wider ids, uint8 colours x 3; depth one float32.
_BYTES_PER_PIXEL = {"rgb": 3, "mask": 3, "depth": 4}


@dataclass(frozen=True)
class SlotArray:
    """Where one modality's frames lie in a slot, and the rest of its ModalityFrames."""

    name: str
    offset: int  # from the start of the slot
    shape: tuple[int, ...]
    dtype: str
    palette: np.ndarray | None
    yuv: YuvFormat | None = None


def source_frame_bytes(config: BuildConfig, units: list[Unit]) -> int:
    """With frames.resize_backend=device, the bytes of the largest probed video's frame in YUV 4:2:0 form (frames
    travel at the source's coded size, which can exceed the output's RGB); else 0."""
    if config.frames.resize_backend != "device":
        return 0
    sizes = [p.info.width * p.info.height for u in units for p in u.probes.values() if isinstance(p, ProbeResult)]
    return max(sizes, default=0) * 3 // 2


def slot_bytes_for(config: BuildConfig, frame_bytes: int = 0) -> int:
    """The largest sample the config can produce, in compact frames (every bucket considered). frame_bytes: the
    largest RGB frame as it travels when that is not the output size (source_frame_bytes)."""
    frames = config.frames
    shapes = [(frames.num_frames, frames.height, frames.width)] + [tuple(bucket) for bucket in frames.buckets]
    pixels = max(t * h * w for t, h, w in shapes)
    rgb = max(pixels * _BYTES_PER_PIXEL["rgb"], max(t for t, _, _ in shapes) * frame_bytes)
    return sum(_aligned(rgb if name == "rgb" else pixels * _BYTES_PER_PIXEL.get(name, 4))
               for name in config.modalities.names)


def _aligned(size: int) -> int:
    return -(-size // _ALIGN) * _ALIGN


class FrameSlots:
    """The rank's side: owns the memory, hands out free slots, reads what workers wrote."""

    def __init__(self, count: int, slot_bytes: int, device: torch.device):
        self.count, self.slot_bytes = count, _aligned(slot_bytes)
        total = self.count * self.slot_bytes
        if not hasattr(os, "memfd_create"):
            raise OSError("shared-memory frame slots need Linux (memfd_create)")
        fd = os.memfd_create("latentforge-frames", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, total)
            os.posix_fallocate(fd, 0, total)  # no memory: fail here, not with SIGBUS in a worker's write
            self._map = mmap.mmap(fd, total)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.path = f"/proc/{os.getpid()}/fd/{fd}"
        self._free = deque(range(self.count))
        self.pinned = self._pin(device, total)

    def _pin(self, device: torch.device, total: int) -> bool:
        """Page-lock the slots for DMA to `device` (CUDA only); False when it is not a GPU or CUDA refuses."""
        if device.type != "cuda":
            return False
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
        try:
            if int(torch.cuda.cudart().cudaHostRegister(address, total, 0)) != 0:
                return False
        except (AttributeError, RuntimeError):  # a torch without the binding: the copies stay correct, not DMA
            return False
        self._pinned_address = address
        return True

    @property
    def free(self) -> int:
        return len(self._free)

    def acquire(self) -> int | None:
        return self._free.popleft() if self._free else None

    def release(self, slot: int) -> None:
        self._free.append(slot)

    def read(self, slot: int, layout: list[SlotArray]) -> dict[str, ModalityFrames]:
        """Views of the frames a worker wrote into `slot` (valid until the slot is released)."""
        base = slot * self.slot_bytes
        return {a.name: ModalityFrames(np.ndarray(a.shape, np.dtype(a.dtype), self._map, base + a.offset), a.palette,
                                       a.yuv)
                for a in layout}

    def close(self) -> None:
        if self.pinned:
            torch.cuda.cudart().cudaHostUnregister(self._pinned_address)
            self.pinned = False
        with contextlib.suppress(BufferError):  # a view still referenced somewhere: the process exit frees it
            self._map.close()
        with contextlib.suppress(OSError):
            os.close(self._fd)


class SlotWriter:
    """A decode worker's side: the same memory, mapped once per worker."""

    def __init__(self, path: str, slot_bytes: int):
        self.slot_bytes = slot_bytes
        with open(path, "r+b") as handle:
            self._map = mmap.mmap(handle.fileno(), 0)

    def write(self, slot: int, modalities: dict[str, ModalityFrames]) -> list[SlotArray] | None:
        """Copy every modality's frames into `slot`; None (nothing written) when they do not fit."""
        layout, offset = [], 0
        for name, frames in modalities.items():
            layout.append(SlotArray(name, offset, frames.values.shape, frames.values.dtype.str, frames.palette,
                                    frames.yuv))
            offset += _aligned(frames.nbytes)
        if offset > self.slot_bytes:
            return None
        base = slot * self.slot_bytes
        for entry, frames in zip(layout, modalities.values()):
            np.ndarray(entry.shape, frames.values.dtype, self._map, base + entry.offset)[...] = frames.values
        return layout
