"""The prompts a build encodes in more than one unit: the only rows a rank's prompt cache has reason to keep.

A unit's prompts go through the encoder in one call, which encodes each distinct prompt once, so a prompt that
occurs in one unit only (a caption of one clip, or of the windows of one video, which sort next to each other) is
never asked for again. The builder knows every unit's prompts before any rank starts and hands each rank this set.

A prompt is named by the first 8 bytes of its BLAKE2b digest, the set kept as a sorted uint64 array: 8 bytes per
repeated prompt, in memory and in each rank's pickled spec, whatever the prompts' length. Two prompts sharing a
digest only make a row kept that needed not be: rows are always encoded from the prompt itself, never looked up
by digest.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

import numpy as np

DIGEST_BYTES = 8


def prompt_digests(prompts: Iterable[str]) -> np.ndarray:
    """uint64 [N]: each prompt's 8-byte BLAKE2b digest of its UTF-8 text."""
    joined = b"".join(hashlib.blake2b(p.encode("utf-8"), digest_size=DIGEST_BYTES).digest() for p in prompts)
    return np.frombuffer(joined, dtype="<u8")


class PromptRepeats:
    """A set of prompts by digest; `prompt in repeats` says whether a rank keeps its encoded row."""

    def __init__(self, digests: np.ndarray):
        self.digests = np.unique(np.asarray(digests, dtype="<u8"))  # sorted, distinct

    @classmethod
    def across(cls, groups: Iterable[Iterable[str]]) -> PromptRepeats:
        """The prompts that occur in more than one group (each group: the prompts of one encoder call, a unit)."""
        per_group = [prompt_digests(set(group)) for group in groups]
        if not per_group:
            return cls(np.zeros(0, dtype="<u8"))
        digests, counts = np.unique(np.concatenate(per_group), return_counts=True)
        return cls(digests[counts > 1])

    def __contains__(self, prompt: str) -> bool:
        digest = prompt_digests([prompt])[0]
        at = int(np.searchsorted(self.digests, digest))
        return at < len(self.digests) and self.digests[at] == digest

    def __len__(self) -> int:
        return len(self.digests)

    @property
    def nbytes(self) -> int:
        """What the set holds: DIGEST_BYTES per repeated prompt."""
        return self.digests.nbytes
