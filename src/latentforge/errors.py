"""Typed errors. Bad input is data: a `SampleRejected` names the sample, the value and the fix."""

from __future__ import annotations

# The closed list of reject reasons (DESIGN §5). Extend it here and in docs/rejects.md together.
REJECT_REASONS = (
    "unreadable",
    "decode_error",
    "too_short",
    "missing_caption",
    "empty_caption",
    "missing_source",
    "modality_mismatch",
    "lossy_mask_source",
    "mask_id_out_of_range",
    "depth_not_finite",
    "duplicate_id",
    "bad_text_pickle",  # text.source pickles*: the sample's t5_xxl pickle is missing, malformed or unsafe
)


class LatentforgeError(Exception):
    """Base class for every error latentforge raises on purpose."""


class ConfigError(LatentforgeError):
    """The configuration is invalid; raised before any model is loaded or any GPU work."""


class CacheIntegrityError(LatentforgeError):
    """A cache on disk does not match what its own records promise."""


class SampleRejected(LatentforgeError):
    """One sample cannot be used. `reason` is one of REJECT_REASONS."""

    def __init__(self, reason: str, sample_id: str, detail: str):
        if reason not in REJECT_REASONS:
            raise ValueError(f"unknown reject reason {reason!r}; allowed: {', '.join(REJECT_REASONS)}")
        self.reason = reason
        self.sample_id = sample_id
        self.detail = detail
        super().__init__(f"sample {sample_id!r}: {reason}: {detail}")
