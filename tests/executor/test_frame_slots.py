"""Shared-memory frame slots: what a worker process writes, the rank reads in place, exactly; what does not fit
is refused rather than cut."""

from __future__ import annotations

import multiprocessing

import numpy as np
import torch

from latentforge.executor.frame_slots import FrameSlots, SlotWriter
from latentforge.records import ModalityFrames
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
