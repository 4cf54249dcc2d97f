"""The caption pass (`captions.mode`): after the probe, before any unit, a caption for each window that needs one.

Which windows: every probed sample under `generate_all`; under `generate_missing` those whose listing has no caption
or a blank one. For each, `captions.frames` source frames spread evenly over the window are decoded (the build's
decode code, resized so the short side is `captions.resolution`) and handed to the captioner `captions.name` with the
prompt; answers come greedily, `captions.batch_size` windows per call. An empty answer, or one that runs into
`captions.max_new_tokens` without ending, is asked once more with the fallback (the `short` template, twice the token
budget); if that too is unusable the sample is rejected `caption_failed`. The caption then stands in the probe result
for the listing's, so the text encoder embeds it as any caption, and its model, prompt and settings go into the
manifest row (`provenance.caption`). The decode and the generation are a DeviceWork (pipeline/device_work.py) that
the executor places where the build's models run (a Ray task on a GPU worker under run.executor=ray); the outcomes
come back to the process that holds the build's records, which records them under build/captions/
(pipeline/caption_records.py): a rerun, a resume or an --extend generates none of them again, and loads no captioner
when none is missing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

import numpy as np

from .. import registry
from ..captions.base import Generation
from ..captions.fitting_batches import FittingBatches
from ..captions.templates import FALLBACK_BUDGET, Prompt, fallback_prompt, resolve_prompt
from ..config import BuildConfig, CaptionsConfig
from ..errors import SampleRejected
from ..records import Reject, Sample
from .caption_records import CaptionOutcome, caption_key, record_caption, recorded_caption
from .device_work import BatchResults, DeviceWork, Place
from .probe import ProbeResult
from .window_frames import sampled_indices, window_frames

Probed = dict[int, "ProbeResult | Reject"]


def needs_caption(sample: Sample, captions: CaptionsConfig) -> bool:
    caption = sample.entry.caption
    return captions.mode == "generate_all" or (captions.mode == "generate_missing"
                                               and (caption is None or not caption.strip()))


def caption_frames(sample: Sample, probe: ProbeResult, config: BuildConfig, indices: list[int]) -> np.ndarray:
    """uint8 [F, h, w, 3]: the frames `indices`, the short side resized to captions.resolution."""
    return window_frames(sample, probe, config, indices, config.captions.resolution, "to caption")


def _describe(generation: Generation, prompt: Prompt, budget: int) -> str:
    what = "empty" if not generation.text else f"over-long (no end within {budget} tokens)"
    return f"{what} with the {prompt.name!r} prompt"


class CaptionGeneration(DeviceWork):
    """The windows still to caption, captioned `captions.batch_size` at a time: each window's CaptionOutcome, or its
    Reject when its frames cannot be decoded (nothing recorded: a rerun decodes it again)."""

    what = "caption pass"

    def __init__(self, config: BuildConfig, windows: list[tuple[Sample, ProbeResult, list[int]]], prompt: Prompt,
                 fallback: Prompt):
        self.config, self.windows = config, windows
        self.prompt, self.fallback = prompt, fallback  # resolved by the pass: a prompt file need not be here

    def batches(self, device: str) -> Iterator[BatchResults]:
        captions = self.config.captions
        captioner: FittingBatches | None = None
        for start in range(0, len(self.windows), captions.batch_size):
            out: BatchResults = {}
            ready, frames = [], []
            for sample, probe, indices in self.windows[start:start + captions.batch_size]:
                try:
                    frames.append(caption_frames(sample, probe, self.config, indices))
                except SampleRejected as error:
                    out[sample.source_index] = Reject.of(sample, error, "decode")
                    continue
                ready.append(sample.source_index)
            if ready:
                if captioner is None:  # only once a caption is missing: a rerun with all recorded loads none
                    captioner = FittingBatches(registry.resolve("captioner", captions.name).load(captions, device),
                                               captions.batch_size)
                out.update(zip(ready, self._outcomes(captioner, frames)))
            yield out

    def _outcomes(self, captioner: FittingBatches, windows: list[np.ndarray]) -> list[CaptionOutcome]:
        """Each window's answer to the prompt; an unusable one asked once more with the fallback."""
        prompt, fallback, budget = self.prompt, self.fallback, self.config.captions.max_new_tokens
        first = captioner.generate(windows, prompt.text, budget)
        again = [i for i, answer in enumerate(first) if not answer.usable]
        second = dict(zip(again, captioner.generate([windows[i] for i in again], fallback.text,
                                                    FALLBACK_BUDGET * budget))) if again else {}
        outcomes = []
        for i, answer in enumerate(first):
            if i not in second:
                outcomes.append(CaptionOutcome(answer.text, prompt.name, retried=False))
            elif second[i].usable:
                outcomes.append(CaptionOutcome(second[i].text, fallback.name, retried=True))
            else:
                outcomes.append(CaptionOutcome(None, fallback.name, retried=True, failure=(
                    f"{_describe(answer, prompt, budget)}, then "
                    f"{_describe(second[i], fallback, FALLBACK_BUDGET * budget)}")))
        return outcomes


class CaptionPass:
    """The build's captions: recorded outcomes read, the rest generated where `place` runs them, and recorded."""

    def __init__(self, config: BuildConfig, build_dir, device):
        self.config, self.build_dir = config, build_dir
        self.captions = config.captions
        self.prompt, self.fallback = resolve_prompt(self.captions.prompt), fallback_prompt()
        # `device`: where the captioner runs, or one of its kind (the dtype follows it)
        identity = registry.resolve("captioner", self.captions.name).identity(self.captions, device)
        self.model_sha256 = identity["model_sha256"]
        self.recipe = {"captioner": identity, "prompt": self.prompt.text, "fallback": self.fallback.text,
                       "resolution": self.captions.resolution, "max_new_tokens": self.captions.max_new_tokens}

    def run(self, samples: list[Sample], probes: Probed, place: Place,
            advance: Callable[[int], None] = lambda n: None) -> Probed:
        """`probes` with each captioned window's caption in place (or its reject), in the same keys."""
        out = dict(probes)
        todo: dict[int, tuple[Sample, ProbeResult, list[int], str]] = {}
        for sample in samples:
            probe = probes.get(sample.source_index)
            if not isinstance(probe, ProbeResult) or not needs_caption(sample, self.captions):
                continue
            indices = sampled_indices(probe.window.indices, self.captions.frames)
            key = caption_key(sample.entry.video, indices, self.recipe)
            recorded = None if key is None else recorded_caption(self.build_dir, key)
            if recorded is not None:
                out[sample.source_index] = self._applied(sample, probe, indices, recorded)
                advance(1)
            else:
                todo[sample.source_index] = (sample, probe, indices, key or "")

        def record(results: BatchResults) -> None:
            for source_index, result in results.items():
                sample, probe, indices, key = todo[source_index]
                if isinstance(result, CaptionOutcome):
                    if key:
                        record_caption(self.build_dir, key, sample.sample_id, result)
                    result = self._applied(sample, probe, indices, result)
                out[source_index] = result
            advance(len(results))

        if todo:
            windows = [(sample, probe, indices) for sample, probe, indices, _ in todo.values()]
            place(CaptionGeneration(self.config, windows, self.prompt, self.fallback), record)
        return out

    def _applied(self, sample: Sample, probe: ProbeResult, indices: list[int], outcome: CaptionOutcome
                 ) -> ProbeResult | Reject:
        if outcome.caption is None:
            error = SampleRejected("caption_failed", sample.sample_id, (
                f"the captioner wrote no usable caption for {sample.entry.video_rel} (frames {indices}): "
                f"{outcome.failure}; raise captions.max_new_tokens, try another captions.prompt, or caption it "
                "yourself"))
            return Reject.of(sample, error, "encode")
        prompt = self.fallback if outcome.retried else self.prompt
        provenance: dict[str, Any] = {
            "generated": True, "captioner": self.captions.name, "model_sha256": self.model_sha256,
            "prompt": prompt.name, "prompt_sha256": prompt.sha256, "frame_indices": indices,
            "resolution": self.captions.resolution,
            "max_new_tokens": self.captions.max_new_tokens * (FALLBACK_BUDGET if outcome.retried else 1),
        }
        if outcome.retried:
            provenance["retried"] = True
        return dataclasses.replace(probe, caption=outcome.caption, caption_provenance=provenance)


def caption_probes(samples: list[Sample], probes: Probed, config: BuildConfig, build_dir, device, place: Place,
                   advance: Callable[[int], None] = lambda n: None) -> Probed:
    """The caption pass over a probed plan, the captions still missing generated where `place` runs them (on
    `device`, or one of its kind); `probes` unchanged under captions.mode=keep."""
    if config.captions.mode == "keep":
        return probes
    return CaptionPass(config, build_dir, device).run(samples, probes, place, advance)


def captions_todo(samples: list[Sample], probes: Probed, config: BuildConfig) -> int:
    """How many probed windows the pass looks at (for the progress bar)."""
    if config.captions.mode == "keep":
        return 0
    return sum(1 for s in samples if isinstance(probes.get(s.source_index), ProbeResult)
               and needs_caption(s, config.captions))
