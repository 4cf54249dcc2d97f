"""cache_config.json's `audio`: how each window's sound was cut, resampled and stored, and the arrays stored for it
beside the latent (docs/audio.md). Absent from a cache built without sound, so such caches keep their bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .conditioning_streams import ConditioningStream

AUDIO = "audio"  # float32 [samples, channels] PCM, zero past the window's own length and where no audio covers it
AUDIO_SPAN = "audio_span"  # float64 [2]: [start, end) seconds audio covers, from the window's first frame; 0, 0: none
AUDIO_LENGTH = "audio_length"  # int64 [1]: the window's own number of samples (round(duration * sample_rate))
AUDIO_LATENT = "audio_latent"  # float32, the audio tokenizer's latent of the PCM (audio.tokenizer); its producer
# is the tokenizer's fingerprint
AUDIO_PRESENT = "audio_present"  # the training item's flag: some audio of the source covers the window


def audio_present(span: Any) -> Any:
    """A training item's audio_present from its audio_span (a tensor or array): audio covers some of the window."""
    return span[1] > span[0]


@dataclass(frozen=True)
class AudioSection:
    """The settings a cache's sound was made with and its stored arrays."""

    sample_rate: int
    channels: int
    samples: int  # the stored length of every row's PCM: the longest window's
    partial: str  # pad | reject
    resampler: dict[str, str]  # libswresample's settings
    rule: str  # how a window's span of time is fixed
    streams: tuple[ConditioningStream, ...]

    @property
    def latent(self) -> ConditioningStream | None:
        """The audio latent's stream, where an audio tokenizer made one."""
        return next((stream for stream in self.streams if stream.name == AUDIO_LATENT), None)

    def to_json(self) -> dict[str, Any]:
        return {"sample_rate": self.sample_rate, "channels": self.channels, "samples": self.samples,
                "pcm": "float32, [samples, channels], zero where no audio covers the window and past its length",
                "partial": self.partial, "resampler": self.resampler, "rule": self.rule,
                "streams": [stream.to_json() for stream in self.streams]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AudioSection:
        return cls(int(data["sample_rate"]), int(data["channels"]), int(data["samples"]), str(data["partial"]),
                   {str(k): str(v) for k, v in data["resampler"].items()}, str(data["rule"]),
                   tuple(ConditioningStream.from_json(s) for s in data["streams"]))
