"""Shared-memory frame slots: what a worker process writes, the rank reads in place, exactly; what does not fit
is refused rather than cut."""

from __future__ import annotations

import multiprocessing

import numpy as np
import torch

from latentforge.config import BuildConfig
from latentforge.decode.modality_frames import ModalityFrames
from latentforge.decode.yuv_format import YuvFormat
from latentforge.executor.frame_slots import FrameSlots, SlotWriter, slot_bytes_for
from latentforge.tokenizers.base import frames_to_input


def _sample(seed: int) -> dict[str, ModalityFrames]:
    rng = np.random.default_rng(seed)
    palette = rng.integers(0, 256, (256, 3), dtype=np.uint8)
    return {
        "rgb": ModalityFrames(rng.integers(0, 256, (5, 8, 12, 3), dtype=np.uint8)),
        "mask": ModalityFrames(rng.integers(0, 4, (5, 8, 12), dtype=np.uint8), palette),
        "depth": ModalityFrames(rng.uniform(-1, 1, (5, 8, 12)).astype(np.float32)),
    }


def _write_in_child(path: str, slot_bytes: int, slots: list[int], answers) -> None:
    writer = SlotWriter(path, slot_bytes)
    answers.put([writer.write(slot, _sample(seed)) for seed, slot in enumerate(slots)])


def test_a_worker_process_writes_and_the_rank_reads_the_same_frames():
    slots = FrameSlots(3, 3 * 4096, torch.device("cpu"))  # each modality starts on a page
    try:
        context = multiprocessing.get_context("spawn")
        answers = context.Queue()
        taken = [slots.acquire(), slots.acquire()]
        child = context.Process(target=_write_in_child, args=(slots.path, slots.slot_bytes, taken, answers))
        child.start()
        layouts = answers.get(timeout=120)
        child.join(timeout=120)
        assert child.exitcode == 0
        for seed, (slot, layout) in enumerate(zip(taken, layouts)):
            read = slots.read(slot, layout)
            for name, frames in _sample(seed).items():
                assert read[name].values.dtype == frames.values.dtype
                assert np.array_equal(read[name].values, frames.values)
                assert np.array_equal(read[name].expanded(), frames.expanded())
        # The device expands the compact forms exactly as the host would.
        for name, frames in slots.read(taken[1], layout).items():
            table = torch.from_numpy(np.arange(256, dtype=np.float64) / 127.5 - 1.0).float()
            host = torch.from_numpy(frames.expanded())
            host = table[host.long()] if host.dtype == torch.uint8 else host
            assert torch.equal(frames_to_input([frames], "cpu")[0], host.movedim(-1, 0)), name
        assert slots.free == 1
        slots.release(taken[0])
        assert slots.free == 2
    finally:
        slots.close()


def test_frames_larger_than_a_slot_are_not_written():
    slots = FrameSlots(1, 4096, torch.device("cpu"))
    try:
        writer = SlotWriter(slots.path, slots.slot_bytes)
        big = {"rgb": ModalityFrames(np.full((2, 40, 40, 3), 7, np.uint8))}
        assert writer.write(0, big) is None
        assert not np.any(slots.read(0, writer.write(0, {"rgb": ModalityFrames(np.zeros((1, 2, 2, 3), np.uint8))})
                                     )["rgb"].values)
    finally:
        slots.close()


def test_yuv_frames_keep_their_format_and_slots_hold_the_source_sized_frames():
    """frames.resize_backend=device: frames travel at the source's coded size, so the slot is sized for the largest
    probed source when that exceeds the output's RGB."""
    fmt = YuvFormat("nv12", 64, 48, "bt709", False, 90, (40, 53), (0, 14, 40, 38), "bicubic")
    frames = ModalityFrames(np.random.default_rng(0).integers(0, 256, (5, fmt.frame_bytes), dtype=np.uint8), yuv=fmt)
    config = BuildConfig()
    config.frames.num_frames, config.frames.height, config.frames.width = 5, 24, 40
    assert slot_bytes_for(config) == 4 * 4096  # 5 x 24 x 40 x 3 RGB bytes, page-aligned
    assert slot_bytes_for(config, fmt.frame_bytes) == 6 * 4096  # 5 x 64 x 48 x 1.5 YUV bytes
    slots = FrameSlots(1, slot_bytes_for(config, fmt.frame_bytes), torch.device("cpu"))
    try:
        layout = SlotWriter(slots.path, slots.slot_bytes).write(0, {"rgb": frames})
        assert layout is not None
        read = slots.read(0, layout)["rgb"]
        assert read.yuv == fmt and np.array_equal(read.values, frames.values)
        assert torch.equal(frames_to_input([read], "cpu"), frames_to_input([frames], "cpu"))
    finally:
        slots.close()
