"""Which bucket a sample goes to (docs/frames.md, "Buckets"), decided by the CPU probe from the source's
displayed size (that of the bucket's window, where the frame size changes mid-stream) and frames.

The rule, over the buckets the source can fill (its displayed size is at least the bucket's on both axes,
unless frames.bucket_upscale, and it has a full window of the bucket's frames):
1. aspect first: the most of the picture kept, min(a_bucket / a_source, a_source / a_bucket) with a = width /
   height (the share a centre crop keeps; with stretch, the least distortion);
2. then the largest resolution, height x width;
3. then the most frames; a tie left after that goes to the bucket listed first.
A source no bucket fits is rejected as no_bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import FramesConfig
from ..config.buckets import Bucket, parse_buckets
from ..errors import SampleRejected
from ..records import Sample, VideoInfo
from ..transforms.window import FrameWindow, select_window, window_size

_KEEP_DIGITS = 6  # kept shares are compared rounded, so equal aspects tie exactly


@dataclass(frozen=True)
class BucketChoice:
    bucket: Bucket
    frames: FramesConfig  # the bucket's single-shape frames settings
    window: FrameWindow
    record: dict[str, Any]  # the manifest row's provenance["bucket"]: name and reason


def kept_share(bucket: Bucket, width: int, height: int) -> float:
    """The share of a width x height picture a centre crop to the bucket's aspect keeps."""
    ratio = bucket.aspect / (width / height)
    return round(min(ratio, 1 / ratio), _KEEP_DIGITS)


def _fits(bucket: Bucket, info: VideoInfo, frames: FramesConfig, sample: Sample
          ) -> tuple[FrameWindow, tuple[int, int]] | str:
    """The bucket's window for this source with the displayed size of its frames, or why the source cannot fill
    the bucket."""
    try:
        window = select_window(info, bucket.frames_config(frames), sample.sample_id, sample.start_frame)
        width, height = info.display_of(window_size(info, window.indices, sample.sample_id, sample.entry.video))
    except SampleRejected as rejected:
        if rejected.reason == "resolution_change":
            return f"{bucket.name}'s window spans a mid-stream change of the frame size"
        return f"{bucket.name} needs more frames"
    if not frames.bucket_upscale and (bucket.width > width or bucket.height > height):
        return f"{bucket.name} is larger than the {width}x{height} picture"
    return window, (width, height)


def choose_bucket(info: VideoInfo, frames: FramesConfig, sample: Sample) -> BucketChoice:
    """The bucket of one probed source; SampleRejected(no_bucket) when none fits."""
    width, height = info.display_size
    fitting: list[tuple[tuple[float, int, int], int, Bucket, FrameWindow, tuple[int, int]]] = []
    misses: list[str] = []
    for order, bucket in enumerate(parse_buckets(frames)):
        found = _fits(bucket, info, frames, sample)
        if isinstance(found, str):
            misses.append(found)
            continue
        window, shown = found
        key = (kept_share(bucket, *shown), bucket.height * bucket.width, bucket.num_frames)
        fitting.append((key, -order, bucket, window, shown))
    if not fitting:
        raise SampleRejected("no_bucket", sample.sample_id,
                             f"the {width}x{height} source with {info.num_frames} frames fits no bucket ("
                             f"{'; '.join(misses)}); add a bucket of at most {width}x{height} and "
                             f"{info.num_frames} frames, or set frames.bucket_upscale=true")
    (share, _, _), _, bucket, window, (width, height) = max(fitting, key=lambda item: (item[0], item[1]))
    reason = (f"keeps {share:.1%} of the {width}x{height} picture, the most of the {len(fitting)} bucket(s) "
              f"it fills{' (upscaling allowed)' if frames.bucket_upscale else ' without upscaling'}; then the "
              f"largest size and most frames among those")
    return BucketChoice(bucket, bucket.frames_config(frames), window, {"name": bucket.name, "reason": reason})
