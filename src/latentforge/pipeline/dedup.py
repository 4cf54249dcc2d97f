"""The near-duplicate pass (`dedup.enabled`): after the probe, before captions and any unit, one window kept of each
group of near-identical windows.

Each probed window gets an embedding: `dedup.frames` source frames spread evenly over it are decoded (the build's
decode code, the short side resized to the CLIP tower's input size), embedded by the CLIP image encoder `dedup.model`
(conditioning/clip_embedding.py), and their unit vectors averaged and normalised: a DeviceWork
(pipeline/device_work.py) that the executor places where the build's models run (a Ray task on a GPU worker under
run.executor=ray). The embeddings come back to the process that holds the build's records, which records them under
build/dedup/ (pipeline/dedup_records.py), so a rerun, a resume or an --extend computes none twice and loads no
encoder when all are recorded. The windows are then walked in plan order (pipeline/near_duplicates.py): a window at
least `dedup.threshold` similar to an earlier kept one is rejected `near_duplicate`, naming that window's sample id
and the similarity; an --extend also compares its new windows with the kept windows of the samples staged before.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from ..conditioning.clip_embedding import ClipImageEmbedder
from ..config import BuildConfig
from ..errors import SampleRejected
from ..records import Reject, Sample
from .dedup_records import (
    KeptWindow,
    embedding_key,
    kept_embedding,
    read_kept,
    record_embedding,
    recorded_embedding,
    write_kept,
)
from .device_work import BatchResults, DeviceWork, Place
from .near_duplicates import near_duplicates
from .probe import ProbeResult
from .window_frames import sampled_indices, window_frames

Probed = dict[int, "ProbeResult | Reject"]


class _Window:
    """A probed window of this pass: its sample, probe, sampled frames, record key and (once known) embedding."""

    def __init__(self, sample: Sample, probe: ProbeResult, indices: list[int], key: str | None):
        self.sample, self.probe, self.indices, self.key = sample, probe, indices, key
        self.source_index, self.sample_id = sample.source_index, sample.sample_id
        self.vector: np.ndarray | None = None


class WindowEmbedding(DeviceWork):
    """The windows still to embed, `dedup.batch_size` at a time (one encoder call a batch): each window's embedding,
    or its Reject when its frames cannot be decoded (nothing recorded: a rerun decodes it again)."""

    what = "near-duplicate pass"

    def __init__(self, config: BuildConfig, windows: list[tuple[Sample, ProbeResult, list[int]]]):
        self.config, self.windows = config, windows

    def batches(self, device: str) -> Iterator[BatchResults]:
        dedup = self.config.dedup
        # loaded only when an embedding is missing (the pass places no work otherwise): a rerun loads none
        embedder = ClipImageEmbedder.load(dedup.model, device, dedup.sha256)
        for start in range(0, len(self.windows), dedup.batch_size):
            out: BatchResults = {}
            ready, frames = [], []
            for sample, probe, indices in self.windows[start:start + dedup.batch_size]:
                try:
                    frames.append(window_frames(sample, probe, self.config, indices, embedder.image_size,
                                                "to compare for near duplicates"))
                except SampleRejected as error:
                    out[sample.source_index] = Reject.of(sample, error, "decode")
                    continue
                ready.append(sample.source_index)
            if ready:
                vectors = embedder.embed([frame for shown in frames for frame in shown]).astype(np.float64)
                row = 0
                for source_index, shown in zip(ready, frames):
                    mean = vectors[row:row + len(shown)].mean(axis=0)
                    row += len(shown)
                    out[source_index] = (mean / np.linalg.norm(mean)).astype(np.float32)
            yield out


class DedupPass:
    """The build's near-duplicate removal: recorded embeddings read, the rest computed where `place` runs them and
    recorded, then the decision here."""

    def __init__(self, config: BuildConfig, build_dir):
        self.config, self.build_dir = config, build_dir
        self.dedup = config.dedup
        self.recipe = {"embedder": ClipImageEmbedder.identity(self.dedup.model), "frames": self.dedup.frames}

    def _windows(self, samples: list[Sample], probes: Probed) -> list[_Window]:
        """The probed windows of `samples`, in plan order, with their recorded embeddings."""
        found = []
        for sample in sorted(samples, key=lambda s: s.source_index):
            probe = probes.get(sample.source_index)
            if isinstance(probe, ProbeResult):
                indices = sampled_indices(probe.window.indices, self.dedup.frames)
                window = _Window(sample, probe, indices, embedding_key(sample.entry.video, indices, self.recipe))
                window.vector = None if window.key is None else recorded_embedding(self.build_dir, window.key)
                found.append(window)
        return found

    def run(self, samples: list[Sample], probes: Probed, place: Place, extending: bool,
            advance: Callable[[int], None] = lambda n: None) -> Probed:
        """`probes` with each near duplicate (or window that cannot be decoded) replaced by its reject."""
        out = dict(probes)
        windows = self._windows(samples, probes)
        todo = {w.source_index: w for w in windows if w.vector is None}
        advance(len(windows) - len(todo))

        def record(results: BatchResults) -> None:
            for source_index, result in results.items():
                window = todo[source_index]
                if isinstance(result, Reject):
                    out[source_index] = result
                    continue
                window.vector = result
                if window.key is not None:
                    record_embedding(self.build_dir, window.key, result)
            advance(len(results))

        if todo:
            place(WindowEmbedding(self.config, [(w.sample, w.probe, w.indices) for w in todo.values()]), record)
        embedded = [w for w in windows if w.vector is not None]
        ours = {s.source_index for s in samples}
        earlier = [w for w in read_kept(self.build_dir) if w.source_index not in ours] if extending else []
        out.update(self._decide(embedded, earlier))
        return out

    def _decide(self, windows: list[_Window], earlier: list[KeptWindow]) -> Probed:
        """Leader clustering over the earlier kept windows and these, in plan order; the duplicates' rejects. Records
        the kept windows."""
        order: list[_Window | KeptWindow] = sorted([*earlier, *windows], key=lambda w: w.source_index)
        kept: list[KeptWindow] = []
        out: Probed = {}
        if order:
            vectors = np.stack([w.vector if isinstance(w, _Window) else kept_embedding(self.build_dir, w)
                                for w in order])
            fixed = np.array([isinstance(w, KeptWindow) for w in order])
            for window, duplicate in zip(order, near_duplicates(vectors, self.dedup.threshold, fixed)):
                if duplicate is not None and isinstance(window, _Window):
                    out[window.source_index] = self._reject(window, order[duplicate.of].sample_id,
                                                            duplicate.similarity)
                elif isinstance(window, _Window):
                    kept.append(KeptWindow(window.source_index, window.sample_id, window.key or ""))
                else:
                    kept.append(window)
        write_kept(self.build_dir, kept)
        return out

    def _reject(self, window: _Window, kept_id: str, similarity: float) -> Reject:
        error = SampleRejected("near_duplicate", window.sample.sample_id, (
            f"{window.sample.entry.video_rel} (frames {window.indices}) is a near duplicate of sample {kept_id!r}, "
            f"which is kept: the cosine similarity of their CLIP embeddings is {similarity:.4f}, at least "
            f"dedup.threshold={self.dedup.threshold}; raise dedup.threshold to keep both"))
        return Reject.of(window.sample, error, "encode")


def dedup_probes(samples: list[Sample], probes: Probed, config: BuildConfig, build_dir, place: Place,
                 extending: bool = False, advance: Callable[[int], None] = lambda n: None) -> Probed:
    """The near-duplicate pass over a probed plan, the embeddings still missing computed where `place` runs them
    (`extending`: the samples of an --extend still to encode, compared with the kept windows of those staged before
    too); `probes` unchanged unless dedup.enabled."""
    if not config.dedup.enabled:
        return probes
    return DedupPass(config, build_dir).run(samples, probes, place, extending, advance)


def dedup_todo(samples: list[Sample], probes: Probed, config: BuildConfig) -> int:
    """How many probed windows the pass looks at (for the progress bar)."""
    if not config.dedup.enabled:
        return 0
    return sum(1 for s in samples if isinstance(probes.get(s.source_index), ProbeResult))
