"""Typed errors, one kind per way a run can end badly, and the messages for faults a user fixes outside
latentforge (disk full, permissions). The CLI maps each kind to an exit code (docs/cli.md).

Bad input is data: a `SampleRejected` names the sample, the value and the fix, and becomes a reject row.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
from typing import Iterator

# The closed list of reject reasons, each with the fix a user applies to the input. Extend it here and in
# docs/rejects.md together.
REJECT_FIXES = {
    "unreadable": "re-download, re-encode or drop the file (or mount the dataset where the table points)",
    "decode_error": "re-encode the source",
    "too_short": "lower frames.num_frames (or the target fps) or drop the short clips",
    "missing_caption": "add the captions, or keep the samples with --on-missing-caption empty",
    "empty_caption": "write the captions, or keep the samples with --on-missing-caption empty",
    "missing_source": "fix the paths in the table, or mount the dataset where they point",
    "modality_mismatch": "regenerate the mask/depth for the same frames and size as the video",
    "lossy_mask_source": "store masks as PNG or FFV1",
    "mask_id_out_of_range": "declare the ids in modalities.mask.ids or fix the masks",
    "depth_not_finite": "fix the depth sources (NaN or Inf)",
    "duplicate_id": "make the ids unique",
    # text.source pickles*: the sample's t5_xxl pickle is missing, malformed or unsafe
    "bad_text_pickle": "regenerate the pickles with `latentforge cosmos t5` (Cosmos-Curate: its split with "
                       "--generate-cosmos-predict-dataset predict2), or use text.source=pickles+encoder",
    # text.on_unknown=reject: more than text.max_unknown_fraction of the caption's tokens are <unk> to the encoder
    "unknown_tokens": "encode such captions with a text encoder that reads their language (text.name=umt5 for "
                      "non-English captions), or keep them with text.on_unknown=warn",
    # frames.buckets: the source is smaller (or shorter) than every bucket
    "no_bucket": "add a bucket the source can fill (detail names its size and frames), or set "
                 "frames.bucket_upscale=true",
    # the window spans a mid-stream change of the frame size; each side alone is fine
    "resolution_change": "choose windows within one frame size (detail names both sizes and where it changes), or "
                         "re-encode the video at one size",
    # segments.detect: no window of the configured length fits between two cuts (margins dropped)
    "shot_too_short": "lower frames.num_frames (or the target fps) or segments.margin_frames; short shots are "
                      "often fine to drop",
    # a table segment (dataset.start_column/end_column) outside its video, ending before it starts, or overlapping
    # another row of the same video
    "bad_segment": "fix the row's start and end (the detail names the row, the video's length and any other row)",
    # dataset.reader=cosmos_curate: a clip's metadata is missing, not JSON, or names frames that are not frame numbers
    "bad_clip_meta": "run Cosmos-Curate's split pipeline on the clip's video again, or remove the clip (the detail "
                     "names it and its metadata file)",
    # a mask or depth source at another rate, or a per-frame side stream, ends (or starts) inside the window
    "side_stream_short": "export the mask/depth/side stream over the whole video, or choose windows it covers (the "
                         "detail names the times it covers and the window's)",
    # a per-frame side stream that cannot be used: no timestamps, not numeric, another width, NaN or Inf
    "bad_side_stream": "fix the side stream file (the detail names it and what is wrong)",
    # segments.min_motion: the window hardly moves (a still, a frozen stream)
    "low_motion": "lower segments.min_motion, or drop still clips",
    # segments.max_black_fraction: too many black or blank frames in the window
    "black_frames": "raise segments.max_black_fraction, or drop the blank stretches",
    # captions.mode=generate_*: the captioner gave an empty or over-long caption, also with the fallback prompt
    "caption_failed": "raise captions.max_new_tokens, try another captions.prompt, or caption the sample yourself",
    # dedup.enabled: the window's CLIP embedding is at least dedup.threshold similar to an earlier kept window's
    "near_duplicate": "raise dedup.threshold if the kept sample the detail names is not the same content (a dataset "
                      "of many repeats may need a higher run.max_reject_fraction)",
    # audio.partial=reject: the audio stream starts after the window's start or ends before its end
    "audio_partial": "choose windows the audio covers, or keep them padded with silence with audio.partial=pad",
    # the first audio stream cannot be decoded within the window (the detail names the time)
    "audio_decode_error": "re-encode the audio (e.g. ffmpeg -i IN -c:v copy -c:a aac OUT), or build without "
                          "audio.enabled",
    # frames.fps=source: the window lasts longer than audio.max_seconds
    "audio_too_long": "raise audio.max_seconds, or set a target frames.fps",
}
REJECT_REASONS = tuple(REJECT_FIXES)


class LatentforgeError(Exception):
    """Base class for every error latentforge raises on purpose (exit 1 from the CLI)."""


class ConfigError(LatentforgeError):
    """The configuration or the command line is invalid; raised before any model is loaded (exit 2)."""


class CacheIntegrityError(LatentforgeError):
    """A cache on disk does not match what its own records promise."""


class NotACache(CacheIntegrityError):
    """The root a verb was given is no cache at all: missing, a file, or a folder without cache_config.json."""


# The fix for a cache file (manifest, config, rejects, shards) that no longer parses: the cache's own records are
# the only copy of what it promises, so it is made again or fetched again.
REBUILD_OR_FETCH = "rebuild the cache, or fetch it again"


class DamagedFile(CacheIntegrityError):
    """A file latentforge wrote no longer parses (cut short, overwritten, or changed by hand): a cache file or a
    build record. One line naming the file, what is wrong and the fix; `path` lets a resume rebuild what it can."""

    def __init__(self, path: os.PathLike[str] | str, problem: str, fix: str):
        self.path = path
        self.problem = one_line(problem)
        super().__init__(f"{path} is damaged ({self.problem}); {fix}")


class DamagedFileWarning(UserWarning):
    """A damaged build record was set aside and what it held is rebuilt (a plan re-read from the inputs, a unit
    encoded again); the CLI prints it as one `warning:` line."""


class ForcedWarning(UserWarning):
    """A check was overridden on request (`--force`): what the output cannot be used for; the CLI prints it as
    one `warning:` line."""


class InputNotice(UserWarning):
    """Something a build decided from its input that the user should see before the work starts (which table
    column gives the sample ids, captions the text encoder cannot read); the CLI prints it as one `note:` line."""


def one_line(text: object) -> str:
    """The first line of an error's text (h5py and pyarrow errors run over several)."""
    lines = str(text).strip().splitlines()
    return lines[0] if lines else type(text).__name__


class StorageError(LatentforgeError):
    """Writing failed for a reason outside latentforge: disk full, quota, permissions, read-only mount."""


class HDF5WriteError(StorageError):
    """A failed HDF5 write. The HDF5 library can crash at interpreter exit after one, so the CLI leaves
    without running its exit hooks."""


class SampleRejected(LatentforgeError):
    """One sample cannot be used. `reason` is one of REJECT_REASONS."""

    def __init__(self, reason: str, sample_id: str, detail: str):
        if reason not in REJECT_REASONS:
            raise ValueError(f"unknown reject reason {reason!r}; allowed: {', '.join(REJECT_REASONS)}")
        self.reason = reason
        self.sample_id = sample_id
        self.detail = detail
        super().__init__(f"sample {sample_id!r}: {reason}: {detail}")


@contextlib.contextmanager
def rejected_if_unexpected(reason: str, sample_id: str, path: str, doing: str, fix: str) -> Iterator[None]:
    """Inside the block, an error nobody expected becomes this sample's reject (`reason`) naming it, so one bad file
    never ends a run; a SampleRejected passes as it is."""
    try:
        yield
    except SampleRejected:
        raise
    except Exception as error:  # noqa: BLE001 - one sample's bad input must not end the run
        raise SampleRejected(reason, sample_id, f"{path}: {doing} raised {type(error).__name__}: {one_line(error)}; "
                             f"{fix} (and report it if it plays elsewhere)") from error


class UnitFailed(LatentforgeError):
    """A unit of work raised something unexpected; the message names the unit, its samples and the error."""

    def __init__(self, unit: int, sample_ids: list[str], error: BaseException):
        shown = ", ".join(sample_ids[:3]) + (f" and {len(sample_ids) - 3} more" if len(sample_ids) > 3 else "")
        lines = str(error).strip().splitlines()
        what = type(error).__name__ + (f": {lines[0]}" if lines else "")
        super().__init__(f"unit {unit} (samples {shown}) failed: {what}; `latentforge --debug ...` shows the "
                         "traceback, rerunning the same command resumes")


class StopRequested(BaseException):
    """SIGTERM or SIGINT reached the main process; a BaseException so no `except Exception` swallows it."""

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


# ------------------------------------------------------------------------------- environment faults

_FAULTS = {
    errno.ENOSPC: ("disk full", "free space"),
    errno.EDQUOT: ("disk quota exceeded", "free space or raise the quota"),
    errno.EFBIG: ("file size limit reached (disk full or ulimit -f)", "free space or raise the limit"),
    errno.EACCES: ("permission denied", "give this user write access"),
    errno.EPERM: ("operation not permitted", "give this user write access"),
    errno.EROFS: ("read-only file system", "mount it read-write or choose another output root"),
}
# h5py reports a failed write as RuntimeError("... filename = '...', ... errno = 28, ...") instead of OSError.
_HDF5_ERRNO = re.compile(r"filename = '([^']*)'.*?errno = (\d+)", re.S)


def environment_message(error: OSError) -> str | None:
    """A one-line description for the OSErrors a user fixes outside latentforge; None for any other."""
    kind = _FAULTS.get(error.errno)
    if kind is None:
        return None
    what, fix = kind
    where = f" writing {error.filename}" if error.filename else ""
    return f"{what}{where} ({error.strerror}); {fix}, then rerun the same command to resume"


def as_os_error(error: BaseException) -> OSError | None:
    """The OSError behind `error`: the errno an HDF5 write failure names (h5py raises it as an OSError or a
    RuntimeError carrying the driver's whole report), else `error` itself; None when there is none."""
    if isinstance(error, (OSError, RuntimeError)):
        match = _HDF5_ERRNO.search(str(error))
        if match:
            number = int(match.group(2))
            return OSError(number, os.strerror(number), match.group(1))
    return error if isinstance(error, OSError) else None


def storage_error(error: BaseException) -> StorageError | None:
    """`error` as the StorageError a user can act on (HDF5WriteError for an HDF5 write), or None."""
    cause = as_os_error(error)
    message = environment_message(cause) if cause is not None else None
    if message is None:
        return None
    return HDF5WriteError(message) if cause is not error else StorageError(message)
