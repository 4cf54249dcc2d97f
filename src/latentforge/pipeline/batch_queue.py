"""A unit's batches, encoded without the host waiting for each one: the device always has work queued.

For each batch the host starts the copies of every modality's compact frames to the device, marks the point
where the device will have read them, and launches the expansions and the encoder; then it goes on to the next
batch while the device works. A sample's frame slot is released once the device has passed that mark, and the
latents come back to the host once per unit. On the CPU every step runs in order and nothing is deferred.

Waiting once per batch (a copy back to the host after each) drained the device's queue every time: it then
idled while the host released slots, took the next sample and launched its copies, and every launch of the
encoder's hundreds of kernels ran behind the GIL hiccups of the rank's other threads.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from ..devices import DeviceClock, wait_for_device
from ..tokenizers.base import Tokenizer, expand_frames, upload_frames
from .conditioning import ConditioningStage
from .sample import SamplePixels


def encode_on_device(batch: list[SamplePixels], tokenizer: Tokenizer, names: tuple[str, ...],
                     conditioning: ConditioningStage | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """[B, C_total, T', H', W'] float32 (a token tokenizer: int64 ids, one stream per modality) on the tokenizer's
    device, each modality through the tokenizer and the channels concatenated, and the conditioning streams built
    from the rgb frames ({} without conditioning); launched, not waited for."""
    with torch.inference_mode():
        return _encode_uploaded(_upload(batch, tokenizer, names), tokenizer, conditioning)


def _upload(batch: list[SamplePixels], tokenizer: Tokenizer, names: tuple[str, ...]) -> dict:
    """Every modality's compact frames on their way to the device (copies started, not waited for)."""
    return {name: [upload_frames(pixels.modalities[name], tokenizer.device) for pixels in batch] for name in names}


def _encode_uploaded(uploaded: dict, tokenizer: Tokenizer, conditioning: ConditioningStage | None
                     ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    latents, streams = [], {}
    for name, frames in uploaded.items():
        video = expand_frames(frames)
        if conditioning is not None and name == "rgb":  # the conditioning is built from the clip's own frames
            latent, streams = conditioning.encode(video, tokenizer.encode)
        else:
            latent = tokenizer.encode(video)
        latents.append(latent)
        del video  # the next modality's frames may take its memory
    if tokenizer.output == "latents":
        latents = [latent.float() for latent in latents]
    return torch.cat(latents, dim=1), streams


class BatchQueue:
    """Encodes a unit's batches back to back on the tokenizer's device; `finish` returns their latents."""

    def __init__(self, tokenizer: Tokenizer, names: tuple[str, ...], seconds: dict[str, float],
                 conditioning: ConditioningStage | None = None):
        self._tokenizer, self._names, self._seconds = tokenizer, names, seconds
        self._conditioning = conditioning
        self._cuda = tokenizer.device.type == "cuda"
        self._latents: list[torch.Tensor] = []
        self._streams: dict[str, list[torch.Tensor]] = {}  # each conditioning stream's batches
        self._unread: list[tuple[torch.cuda.Event, list[Callable[[], None]]]] = []  # slots the device may still read
        self._clocks: list[DeviceClock] = []  # each batch's device time

    def launch(self, batch: list[SamplePixels], releases: list[Callable[[], None]]) -> None:
        """Queue one batch; `releases` free its samples' frames once the device has read them."""
        self._release_read()
        if not self._cuda:
            started = time.perf_counter()
            self._keep(*encode_on_device(batch, self._tokenizer, self._names, self._conditioning))
            self._seconds["encode"] += time.perf_counter() - started
            for release in releases:
                release()
            return
        read = torch.cuda.Event()
        with torch.inference_mode():
            clock = DeviceClock(self._tokenizer.device)
            uploaded = _upload(batch, self._tokenizer, self._names)
            read.record()
            self._keep(*_encode_uploaded(uploaded, self._tokenizer, self._conditioning))
            self._clocks.append(clock.stop())
        self._unread.append((read, list(releases)))

    def _keep(self, latents: torch.Tensor, streams: dict[str, torch.Tensor]) -> None:
        self._latents.append(latents)
        for name, values in streams.items():
            self._streams.setdefault(name, []).append(values)

    def finish_conditioning(self, storage_dtype: np.dtype) -> dict[str, np.ndarray]:
        """The unit's conditioning streams in `storage_dtype`, after `finish` (which waited for the device)."""
        streams = {name: torch.cat(parts).cpu().numpy().astype(storage_dtype) for name, parts in self._streams.items()}
        self._streams.clear()
        return streams

    def finish(self, storage_dtype: np.dtype) -> np.ndarray | None:
        """Wait for the device, release every slot, and return the unit's latents in `storage_dtype` (None when
        no batch was launched)."""
        if not self._latents:
            return None
        stacked = torch.cat(self._latents)
        wait_for_device(self._tokenizer.device)  # the one wait for the device in a unit's encode
        if self._cuda:  # into page-locked memory: DMA (a unit's float32 latents took 0.19 s to pageable memory)
            stacked = torch.empty(stacked.shape, dtype=stacked.dtype, pin_memory=True).copy_(stacked)
        else:
            stacked = stacked.cpu()
        self._latents.clear()
        self._release_read()
        if self._clocks:
            self._seconds["encode"] += sum(clock.seconds() for clock in self._clocks)
            self._clocks.clear()
        return stacked.numpy().astype(storage_dtype)

    def _release_read(self) -> None:
        """Free the slots of every batch whose frames the device has read (all of them once it is idle)."""
        still: list[tuple[torch.cuda.Event, list[Callable[[], None]]]] = []
        for read, releases in self._unread:
            if read.query():
                for release in releases:
                    release()
            else:
                still.append((read, releases))
        self._unread = still
