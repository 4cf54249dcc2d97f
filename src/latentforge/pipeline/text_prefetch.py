"""A unit's prompts encoded while its batches run: the rank's text encoder in its own thread, on its own stream.

Each distinct prompt runs alone (text/hf_encoder.py), and one T5-11B forward over a short prompt is bound by the
host's launches: about 29 ms per prompt on an H200 host, the GPU mostly idle meanwhile. Queued behind a unit's
batches that cost 5 % of an RGB build. Started when the unit starts, in a thread on a side stream, its kernels
fill the encoder's gaps and the host launches them while the main thread sleeps on the launch pacer. The rows
are the same bits either way: a prompt's row depends on the prompt alone. On the CPU the encoder runs at once,
in the calling thread, before the unit's batches (the cores are the encoder's either way).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from ..devices import DeviceClock
from ..text.base import TextBatch
from .text_stage import TextSource, UnitText


class TextPrefetch:
    """Encodes prompts through `source` (text.source=encoder) off the main thread on a CUDA device."""

    def __init__(self, source: TextSource, device: torch.device, threaded: bool | None = None):
        """threaded: None runs the thread on a CUDA device only (tests set it on the CPU)."""
        self._source, self._device = source, device
        cuda = device.type == "cuda"
        threaded = cuda if threaded is None else threaded
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="text-encoder") if threaded else None
        self._stream = torch.cuda.Stream(device) if cuda else None

    def submit(self, prompts: list[str]) -> Future[tuple[UnitText, float]]:
        """The prompts' rows and the device seconds they took (on the text stream)."""
        if self._pool is None:
            done: Future[tuple[UnitText, float]] = Future()
            try:
                done.set_result(self._encode(prompts))
            except Exception as error:  # noqa: BLE001 - raised where the caller takes the result, as on the GPU
                done.set_exception(error)
            return done
        return self._pool.submit(self._on_stream, prompts)

    def _on_stream(self, prompts: list[str]) -> tuple[UnitText, float]:
        with torch.cuda.stream(self._stream):  # None (the CPU): no stream to enter
            return self._encode(prompts)

    def _encode(self, prompts: list[str]) -> tuple[UnitText, float]:
        clock = DeviceClock(self._device)
        text = self._source.rows(prompts, [None] * len(prompts))  # waits for its own stream only
        return text, clock.stop().seconds()

    def close(self) -> None:
        """Let the thread go: after the last unit nothing is pending; after a failure, nothing still queued runs."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def select_rows(text: UnitText, positions: list[int]) -> UnitText:
    """The rows at `positions`, in that order."""
    index = np.asarray(positions, dtype=np.int64)
    batch = text.batch
    return UnitText(TextBatch(batch.embeddings[index], batch.lengths[index], batch.truncated[index]),
                    [text.provenance[i] for i in positions])
