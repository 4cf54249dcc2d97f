"""The CPU-only probe: reject what can be rejected before GPU work, fix each sample's window and resize geometry.
Decodes the video once (decode/stream_probe.py) and reads modality headers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..config import BuildConfig
from ..decode.resize import ResizeGeometry, plan_resize
from ..decode.sources import ModalitySource, check_matches_video, probe_modality_source
from ..decode.stream_probe import probe_video
from ..decode.yuv_capture import check_yuv_source
from ..errors import SampleRejected, rejected_if_unexpected
from ..records import Reject, Sample, VideoInfo
from ..transforms.window import FrameWindow, select_window, window_size
from .audio_window import check_sound_fits
from .bucket_choice import choose_bucket
from .modality_times import TimedFrames, frames_by_time, source_rate
from .side_streams import SideRows, probe_side_streams


@dataclass(frozen=True, slots=True)
class ProbeResult:
    info: VideoInfo
    window: FrameWindow
    plan: ResizeGeometry
    caption: str
    modality_info: dict[str, Any] = field(default_factory=dict)  # modality -> ModalitySource
    bucket: dict[str, Any] | None = None  # with frames.buckets: the bucket's name and why it was chosen
    segment: dict[str, Any] | None = None  # with segments: the window's shot or segment and quality scores
    # mask/depth sources matched to the window by time (their rate differs): their frame for each window frame
    timed: dict[str, TimedFrames] = field(default_factory=dict)
    side: dict[str, SideRows] = field(default_factory=dict)  # per-frame side streams: the rows of each window frame
    # a generated caption's model, prompt and settings (pipeline/captions.py); None: the listing's caption
    caption_provenance: dict[str, Any] | None = None


def resolve_caption(sample: Sample, config: BuildConfig) -> str:
    """The prompt; a missing or blank caption is rejected, or becomes "" under on_missing_caption: empty."""
    caption = sample.entry.caption
    if config.captions.mode != "keep" and (caption is None or not caption.strip()):
        return ""  # the caption pass writes one (pipeline/captions.py)
    keep_empty = config.dataset.on_missing_caption == "empty"
    if caption is None:
        if keep_empty:
            return ""
        raise SampleRejected(
            "missing_caption",
            sample.sample_id,
            f"no caption for {sample.entry.video_rel}; add one or set dataset.on_missing_caption=empty",
        )
    if not caption.strip():
        if keep_empty:
            return ""
        raise SampleRejected(
            "empty_caption",
            sample.sample_id,
            f"caption {caption!r} of {sample.entry.video_rel} is blank; fix it or set dataset.on_missing_caption=empty",
        )
    return caption


def probe_sample(sample: Sample, config: BuildConfig) -> ProbeResult:
    """Order of checks: video exists and is readable, caption, window length (with frames.buckets: the
    bucket, pipeline/bucket_choice.py), the window's frame size, then each extra modality, then the side streams.
    Any failure is this sample's reject: an unexpected one becomes unreadable naming it, so one bad file never
    ends a build."""
    with rejected_if_unexpected("unreadable", sample.sample_id, sample.entry.video, "probing it",
                                "re-encode or drop the file"):
        return _probe(sample, config)


def _probe(sample: Sample, config: BuildConfig) -> ProbeResult:
    info = probe_video(sample.entry.video, sample.sample_id)
    caption = resolve_caption(sample, config)
    frames, bucket = config.frames, None
    if frames.buckets:
        choice = choose_bucket(info, frames, sample)
        frames, window, bucket = choice.frames, choice.window, choice.record
    else:
        window = select_window(info, frames, sample.sample_id, sample.start_frame)
    coded = window_size(info, window.indices, sample.sample_id, sample.entry.video)
    if config.frames.resize_backend == "device":
        check_yuv_source(info.pix_fmt, *coded, sample.entry.video, sample.sample_id)
    width, height = info.display_of(coded)
    plan = plan_resize(width, height, frames.width, frames.height, frames.resize, stored=info.upright_of(coded))
    modality_info: dict[str, ModalitySource] = {}
    timed: dict[str, TimedFrames] = {}
    for name in config.modalities.names:
        if name == "rgb":
            continue
        path = sample.entry.mask if name == "mask" else sample.entry.depth
        source = probe_modality_source(name, path, sample.sample_id)
        rate = source_rate(source, info, getattr(config.modalities, name).fps)
        check_matches_video(source, info, (plan.stored_w, plan.stored_h), sample.sample_id, by_time=rate is not None)
        if rate is not None:
            timed[name] = frames_by_time(source, info, window, rate, sample.sample_id)
        modality_info[name] = source
    side = probe_side_streams(sample, config, info, window)
    check_sound_fits(sample, info, window, config)
    return ProbeResult(info=info, window=window, plan=plan, caption=caption, modality_info=modality_info,
                       bucket=bucket, segment=sample.segment, timed=timed, side=side)


def probe_all(samples: list[Sample], config: BuildConfig, advance: Callable[[int], None] = lambda n: None
              ) -> dict[int, ProbeResult | Reject]:
    """{source_index: probe result or reject} of every planned sample; advance(1) after each."""
    probes: dict[int, ProbeResult | Reject] = {}
    for sample in samples:
        probes.update(probe_samples([sample], config))
        advance(1)
    return probes


def vfr_notice(samples: list[Sample], probes: dict[int, ProbeResult | Reject]) -> str | None:
    """The build's one line on variable-frame-rate sources among the probed videos (each counted once), or None."""
    videos = {sample.entry.video for sample in samples
              if isinstance(probe := probes.get(sample.source_index), ProbeResult) and probe.info.vfr}
    if not videos:
        return None
    example = sorted(s.entry.video_rel for s in samples if s.entry.video in videos)[0]
    return (f"{len(videos)} source video(s) have a variable frame rate (e.g. {example}); their frames are chosen "
            "by presentation time and their rows say provenance.vfr = true")


def probe_samples(samples: list[Sample], config: BuildConfig) -> list[tuple[int, ProbeResult | Reject]]:
    """(source_index, probe result or reject) of each sample, in order: one process's share of a parallel probe,
    the windows of one video together so its stream is decoded once (decode/stream_probe.py caches it)."""
    probes: list[tuple[int, ProbeResult | Reject]] = []
    for sample in samples:
        try:
            probes.append((sample.source_index, probe_sample(sample, config)))
        except SampleRejected as error:
            probes.append((sample.source_index, Reject.of(sample, error, "probe")))
    return probes
