"""The one function that runs a unit of work: decoded samples -> tokenize -> text-encode -> stage.

Executors only decide where a unit runs and who decodes its samples; what a unit produces depends on
nothing but its samples, the config and the models. The local executor and a Ray actor both call `run_unit`.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..cache.audio_section import AUDIO, AUDIO_LATENT
from ..cache.encoded_by import function_digest
from ..config import BuildConfig
from ..devices import DeviceClock
from ..errors import SampleRejected
from ..records import Reject
from ..staging.remote_staging import stage_unit
from ..staging.staged_units import StagedRow
from ..testing.fault_points import fault_point
from ..text.prompt_cache import PromptCache
from ..tokenizers.audio_base import AudioTokenizer
from ..tokenizers.base import Tokenizer
from .audio_latent import audio_latent_stream, encode_audio_rows, load_audio_tokenizer
from .audio_window import audio_streams
from .batch_queue import BatchQueue, encode_on_device
from .conditioning import ConditioningStage
from .environment import environment_record
from .probe import ProbeResult
from .sample import SamplePixels
from .side_streams import side_stream_records
from .text_prefetch import TextPrefetch, select_rows
from .text_stage import PickledText, TextSource, text_source
from .unit_inputs import Decoded, Unit


@dataclass(frozen=True)
class StagedPayload:
    """Everything write_staged_unit needs for one unit; handed to a writer so encoding can go on."""

    unit: int
    rows: list[StagedRow]
    latents: np.ndarray
    text_embeddings: np.ndarray | None
    text_lengths: np.ndarray | None
    rejects: list[Reject]
    num_samples: int  # planned samples of the unit, accepted or not
    encoded_by: dict[str, Any]  # {"function": tokenizer fingerprint digest, "environment": device and software}
    conditioning: dict[str, np.ndarray] = field(default_factory=dict)  # stream name -> [n, ...] storage dtype
    text_max_length: int | None = None  # the L rows are read back as; text_embeddings may be padded to less


def stage_now(build_dir: Path, staging_url: str = "") -> Callable[[StagedPayload], None]:
    """The synchronous stager: write the unit (into build_dir/staging, or to output.staging_url) before returning
    (the Ray executor and tests use it)."""

    def stage(payload: StagedPayload) -> None:
        stage_unit(build_dir, staging_url, payload.unit, payload.rows, payload.latents, payload.text_embeddings,
                   payload.text_lengths, payload.rejects, payload.encoded_by, conditioning=payload.conditioning,
                   text_max_length=payload.text_max_length)

    return stage


@dataclass
class UnitContext:
    """What a rank holds for its whole life: config, models, where staged units go, and its clocks."""

    config: BuildConfig
    tokenizer: Tokenizer
    text: PromptCache | None  # the rank's encoder behind its prompt cache; None when units run no encoder
    stage: Callable[[StagedPayload], None]
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    samples_done: int = 0
    text_source: TextSource | None = field(init=False)  # text.source applied to `text`; None: no text stage
    # text.source=encoder: the unit's prompts go through the encoder while its batches run
    text_prefetch: TextPrefetch | None = field(init=False)
    encoded_by: dict[str, Any] = field(init=False)  # recorded with every staged unit
    # the image conditioning config.conditioning asks for (its models loaded here, once); None: none
    conditioning: ConditioningStage | None = field(init=False)

    def __post_init__(self) -> None:
        self.conditioning = ConditioningStage.load(self.config, self.tokenizer)
        self.text_source = text_source(self.config, self.text)
        prefetch = self.text_source is not None and self.text_source.mode == "encoder"
        self.text_prefetch = TextPrefetch(self.text_source, self.tokenizer.device) if prefetch else None
        self.encoded_by = {"function": function_digest(self.tokenizer.fingerprint()),
                           "environment": environment_record(self.tokenizer.device)}

    @property
    def storage_dtype(self) -> np.dtype:
        """The text embeddings' dtype."""
        return np.dtype(self.config.output.storage_dtype)

    @property
    def latent_dtype(self) -> np.dtype:
        """The latents' dtype: storage_dtype, or an unsigned integer for token ids."""
        return np.dtype(type(self.tokenizer).latent_storage_dtype(self.config.output.storage_dtype))

    @functools.cached_property
    def audio_tokenizer(self) -> AudioTokenizer | None:
        """audio.tokenizer's model on the tokenizer's device, loaded at the first unit that encodes sound."""
        return load_audio_tokenizer(self.config, self.tokenizer.device)

    def close(self) -> None:
        """Stop the text thread (after the last unit)."""
        if self.text_prefetch is not None:
            self.text_prefetch.close()


def encode_batch(batch: list[SamplePixels], ctx: UnitContext) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """[B, C_total, T', H', W'] in the storage dtype, waited for: each modality through the tokenizer, channels
    concatenated; and the conditioning streams in the storage dtype."""
    latents, streams = encode_on_device(batch, ctx.tokenizer, ctx.config.modalities.names, ctx.conditioning)
    fault_point("encode")
    return (latents.cpu().numpy().astype(ctx.latent_dtype),
            {name: values.cpu().numpy().astype(ctx.storage_dtype) for name, values in streams.items()})


def _row_shape(ctx: UnitContext) -> tuple[int, ...]:
    frames = ctx.config.frames
    channels, *rest = ctx.tokenizer.latent_shape(frames.num_frames, frames.height, frames.width)
    return (channels * len(ctx.config.modalities.names), *rest)


def _encode_sound(ctx: UnitContext, streams: dict[str, np.ndarray]) -> float:
    """streams[AUDIO_LATENT] from streams[AUDIO]; the seconds it took."""
    started = time.perf_counter()
    pcm = streams[AUDIO]
    if len(pcm):
        streams[AUDIO_LATENT] = encode_audio_rows(ctx.audio_tokenizer, pcm)
    else:  # a unit of rejects only
        stream = audio_latent_stream(ctx.config, pcm.shape[1])
        streams[AUDIO_LATENT] = np.zeros((0, *stream.shape), stream.dtype)
    return time.perf_counter() - started


def run_unit(unit: Unit, ctx: UnitContext, decoded: Iterable[Decoded]) -> None:
    """Encode one unit from its decoded samples (one per planned sample, in source_index order) and stage it.

    The batch split depends only on the unit's accepted samples, so every executor produces the same rows.
    """
    batch_size = ctx.config.output.batch_size
    rows: list[StagedRow] = []  # prompt_truncated is known only after text encoding
    queue = BatchQueue(ctx.tokenizer, ctx.config.modalities.names, ctx.seconds, ctx.conditioning)
    rejects: list[Reject] = []
    prompts: list[str] = []
    pickled: list[PickledText | None] = []
    pending: list[SamplePixels] = []
    # the streams decode makes (side streams, sound), stored as decoded (docs/modalities.md, docs/audio.md)
    decoded_streams = side_stream_records(ctx.config) + audio_streams(ctx.config)
    side: dict[str, list[np.ndarray]] = {stream.name: [] for stream in decoded_streams}  # the rows', row order
    held: list[Callable[[], None]] = []  # the pending samples' releases
    # Every probed sample's prompt, started now; the rows of the samples decode rejects are dropped at the end
    prompt_of = {s.source_index: probe.caption for s in unit.samples
                 if isinstance(probe := unit.probes[s.source_index], ProbeResult)}
    # Each caption's share of tokens the text encoder does not know, on the host before any text thread starts (the
    # tokenizer is not to be shared between threads): recorded per row, and under text.on_unknown=reject a sample
    # over the limit is rejected before it joins a batch, so it shifts no batch
    unknown_of: dict[int, float | None] = {}
    if ctx.text_source is not None and prompt_of:
        unknown_of = dict(zip(prompt_of, ctx.text_source.unknown_fractions(list(prompt_of.values()))))
        prompt_of = {index: prompt for index, prompt in prompt_of.items()
                     if not ctx.text_source.rejects_unknown(unknown_of[index])}
    prefetched = ctx.text_prefetch.submit(list(prompt_of.values())) if ctx.text_prefetch and prompt_of else None

    def flush() -> None:
        if not pending:
            return
        queue.launch(pending, held)
        fault_point("encode")
        pending.clear()
        held.clear()

    expected = iter(unit.samples)
    for item in decoded:
        sample = next(expected)
        if item.source_index != sample.source_index:
            raise RuntimeError(f"unit {unit.index}: decoded source_index {item.source_index} arrived where "
                               f"{sample.source_index} was due; decoders must keep plan order")
        if isinstance(item.result, Reject):
            item.release()
            rejects.append(item.result)
            continue
        pixels = item.result
        probe = unit.probes[sample.source_index]
        unknown = unknown_of.get(sample.source_index)
        try:  # before the tokenizer, so a sample without usable text costs no encode and shifts no batch
            pickled_text = ctx.text_source.pickled(sample) if ctx.text_source is not None else None
            if pickled_text is not None:
                unknown = None  # a pickle row: the encoder's tokenizer did not make it
            elif ctx.text_source is not None:
                ctx.text_source.check_unknown(sample, probe.caption, unknown)
        except SampleRejected as error:
            item.release()
            rejects.append(Reject.of(sample, error, "encode"))
            continue
        rows.append(StagedRow(sample_id=sample.sample_id, source_index=sample.source_index, prompt=probe.caption,
                              prompt_truncated=False, source_path=sample.entry.video_rel, unit=unit.index,
                              batch=len(rows) // batch_size, provenance=pixels.provenance,
                              extra=dict(sample.entry.extra), unknown_token_fraction=unknown,
                              condition_frame=None if ctx.conditioning is None
                              else int(pixels.provenance["frame_indices"][0])))
        prompts.append(probe.caption)
        for name, values in side.items():
            values.append(pixels.side[name] if name in pixels.side else pixels.audio[name])
        pickled.append(pickled_text)
        pending.append(pixels)
        held.append(item.release)
        if len(pending) == batch_size:
            flush()
    flush()
    missing = [s.sample_id for s in expected]
    if missing:
        raise RuntimeError(f"unit {unit.index}: no decode outcome for {missing[:3]}")

    text, text_clock = None, None
    if prefetched is not None:
        encoded, seconds = prefetched.result()
        ctx.seconds["text"] += seconds
        position = {index: i for i, index in enumerate(prompt_of)}
        text = select_rows(encoded, [position[row.source_index] for row in rows]) if rows else None
    elif ctx.text_source is not None and rows:
        # Pickles are read on the host; an encoder (pickles+encoder) queues behind the unit's batches, so the
        # device runs it without a gap. "text" is the device's time from the last batch to the rows' return.
        text_clock = DeviceClock(ctx.tokenizer.device)
        text = ctx.text_source.rows(prompts, pickled)
        text_clock.stop()
    stacked = queue.finish(ctx.latent_dtype)
    if stacked is None:
        stacked = np.zeros((0, *_row_shape(ctx)), dtype=ctx.latent_dtype)
    streams = queue.finish_conditioning(ctx.storage_dtype)
    for stream in ctx.conditioning.streams if ctx.conditioning is not None and not rows else ():
        streams[stream.name] = np.zeros((0, *stream.shape), dtype=ctx.storage_dtype)  # a unit of rejects only
    for stream in decoded_streams:
        streams[stream.name] = (np.stack(side[stream.name]) if rows
                                else np.zeros((0, *stream.shape), dtype=stream.dtype))
    if ctx.audio_tokenizer is not None:  # audio.tokenizer: each row's PCM encoded (docs/audio.md)
        ctx.seconds["audio_encode"] += _encode_sound(ctx, streams)
    if text_clock is not None:
        ctx.seconds["text"] += text_clock.seconds()
    text_embeddings = text_lengths = None
    if text is not None:
        text_embeddings = text.batch.embeddings.astype(ctx.storage_dtype)
        text_lengths = text.batch.lengths
        with_text = ctx.text_source.records_provenance
        rows = [dataclasses.replace(row, prompt_truncated=bool(truncated),
                                    provenance={**row.provenance, "text": origin} if with_text else row.provenance)
                for row, truncated, origin in zip(rows, text.batch.truncated, text.provenance)]

    started = time.perf_counter()
    ctx.stage(StagedPayload(unit.index, rows, stacked, text_embeddings, text_lengths, rejects,
                            len(unit.samples), ctx.encoded_by, streams,
                            ctx.text_source.max_length if text is not None else None))
    ctx.seconds["stage_handoff"] += time.perf_counter() - started
    ctx.samples_done += len(unit.samples)
