"""A caption batch that runs out of GPU memory is asked again in halves, the smaller batch kept and announced once;
a single window that does not fit stops with what to lower."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latentforge.captions.base import Generation
from latentforge.captions.fitting_batches import FittingBatches
from latentforge.errors import InputNotice, LatentforgeError


class Fits:
    """A captioner whose GPU holds `room` windows per call; it answers each window with its number."""

    def __init__(self, room: int):
        self.room, self.calls = room, []

    def generate(self, windows, prompt, max_new_tokens):
        self.calls.append(len(windows))
        if len(windows) > self.room:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return [Generation(str(int(w[0, 0, 0, 0])), True) for w in windows]


def windows(n: int) -> list[np.ndarray]:
    return [np.full((2, 4, 6, 3), i, np.uint8) for i in range(n)]


def test_a_batch_too_large_is_halved_kept_smaller_and_announced_once():
    captioner = Fits(room=2)
    fitting = FittingBatches(captioner, batch_size=8)
    with pytest.warns(InputNotice, match=r"on 8 windows at once; captioning 4 at a time") as notes:
        first = fitting.generate(windows(8), "describe", 16)
    assert [g.text for g in first] == [str(i) for i in range(8)]  # every window answered, in order
    assert captioner.calls == [8, 4, 2, 2, 2, 2]
    assert fitting.limit == 2 and len(notes) == 2  # 8 -> 4, then 4 -> 2
    captioner.calls.clear()
    second = fitting.generate(windows(5), "describe", 16)
    assert [g.text for g in second] == [str(i) for i in range(5)]
    assert captioner.calls == [2, 2, 1]  # the lowered batch holds: no more tries at the larger one


def test_a_single_window_that_does_not_fit_names_what_to_lower():
    fitting = FittingBatches(Fits(room=0), batch_size=2)
    with pytest.warns(InputNotice), pytest.raises(LatentforgeError, match=r"single window \(2 frames of 6x4\); "
                                                  r"lower captions.frames or captions.resolution"):
        fitting.generate(windows(2), "describe", 16)
