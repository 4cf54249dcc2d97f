"""TransNetV2 over a whole video, and its per-frame predictions turned into transitions (docs/long-videos.md).

Windows: as the official predict_frames, the video is padded with 25 copies of its first frame before it and copies
of its last frame after it, and read in windows of 100 frames, 50 apart; of each window the predictions of its
middle 50 frames are kept, so every frame is predicted exactly once, with at least 25 frames of context on each
side. Frames come in one at a time, so a video of any length needs memory for one window.

Transitions: a run of frames whose single-frame prediction is above the threshold is one transition, as the official
predictions_to_scenes reads it: the run's first frame is the old shot's last, the frame after the run the new shot's
first. The all-frames head marks every frame of a transition; where it marks frames next to the run, the transition
is widened to them, so the frames a dissolve mixes belong to neither shot. A transition of one flagged frame is a
hard cut; a longer one is gradual, its frames between the two shots kept out of both.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .transitions import Transition, spaced

WINDOW, STRIDE = 100, 50
CONTEXT = (WINDOW - STRIDE) // 2  # frames of padding before the first frame, and of context kept on each side
ALL_FRAMES_THRESHOLD = 0.5  # the all-frames head's probability above which a frame next to a transition is in it

# a window of uint8 [WINDOW, 27, 48, 3] RGB frames -> (single-frame, all-frames) probabilities, float [WINDOW] each
Predict = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


class WindowedPredictions:
    """Frames fed one at a time; `finish` gives each frame's two predictions, float32 [frames] each."""

    def __init__(self, predict: Predict):
        self._predict = predict
        self._window: list[np.ndarray] = []
        self._single: list[np.ndarray] = []
        self._all: list[np.ndarray] = []
        self.frames = 0

    def feed(self, frame: np.ndarray) -> None:
        if not self.frames:
            self._window = [frame] * CONTEXT
        self._window.append(frame)
        self.frames += 1
        if len(self._window) == WINDOW:
            self._run()

    def _run(self) -> None:
        single, all_frames = self._predict(np.stack(self._window))
        self._single.append(np.asarray(single, np.float32)[CONTEXT:CONTEXT + STRIDE])
        self._all.append(np.asarray(all_frames, np.float32)[CONTEXT:CONTEXT + STRIDE])
        del self._window[:STRIDE]

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.frames:
            return np.zeros(0, np.float32), np.zeros(0, np.float32)
        while len(self._single) * STRIDE < self.frames:  # the last windows padded with copies of the last frame
            self._window += [self._window[-1]] * (WINDOW - len(self._window))
            self._run()
        return np.concatenate(self._single)[:self.frames], np.concatenate(self._all)[:self.frames]


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) of each run of True, last inclusive."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist()))


def transitions_from_predictions(single: np.ndarray, all_frames: np.ndarray, threshold: float,
                                 min_shot_frames: int) -> list[Transition]:
    """The transitions that per-frame probabilities mark (module docstring). A run that touches the video's first
    or last frame has no shot on one side and is not a transition."""
    frames = len(single)
    marked = all_frames > ALL_FRAMES_THRESHOLD
    spans: list[tuple[int, int]] = []
    for first, last in _runs(single > threshold):
        while first > 0 and marked[first - 1]:
            first -= 1
        while last < frames - 1 and marked[last + 1]:
            last += 1
        if spans and first <= spans[-1][1] + 1:  # widened into the previous one: the same transition
            first = spans.pop()[0]
        spans.append((first, last))
    found = []
    for first, last in spans:
        if first == 0 or last == frames - 1:
            continue
        if first == last:
            found.append(Transition(first + 1, first + 1, first + 1, "cut"))
        else:  # frames first + 1 .. last are between the shots
            found.append(Transition((first + last + 3) // 2, first + 1, last + 1, "gradual"))
    return spaced(found, frames, min_shot_frames)
