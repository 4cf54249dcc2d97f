"""A transition between two shots, and the rule every detector's transitions pass before they are recorded: inside
the video, and no shot between two of them shorter than `min_shot_frames` (docs/long-videos.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Transition:
    """A cut between two shots. `frame` is the first frame of the new shot (a gradual transition's centre);
    frames `first .. last - 1` belong to neither shot (none for a hard cut: first == last == frame)."""

    frame: int
    first: int
    last: int
    kind: str  # cut | gradual


def spaced(found: list[Transition], frames: int, min_shot_frames: int) -> list[Transition]:
    """`found` in frame order, each clipped to the video's frames 1 .. frames; one that starts fewer than
    `min_shot_frames` frames after the previous kept one ends is dropped."""
    kept: list[Transition] = []
    for transition in sorted(found, key=lambda t: t.frame):
        if 0 < transition.frame < frames and (not kept or transition.first - kept[-1].last >= min_shot_frames):
            kept.append(Transition(transition.frame, max(transition.first, 1), min(transition.last, frames),
                                   transition.kind))
    return kept
