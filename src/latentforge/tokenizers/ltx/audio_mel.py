"""LTX-2's audio front end: PCM -> the log-mel spectrogram its audio VAE encodes.

diffusers ships the audio VAE (AutoencoderKLLTX2Audio) but no encode-side front end; LTX-2's reference (ltx-core's
`AudioProcessor.waveform_to_mel`) computes torchaudio's `MelSpectrogram` with the settings of MelSettings, then
log(clamp(mel, 1e-5)), laid out [batch, channels, frames, mel_bins]. torchaudio is not a dependency: the same
operations are written out here, in torchaudio's order (torch.stft, |X|, the Slaney filterbank built as
`melscale_fbanks` builds it, the matmul as `MelScale` does it), so the result equals torchaudio's bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

LOG_FLOOR = 1e-5  # log(clamp(mel, min=LOG_FLOOR))


@dataclass(frozen=True)
class MelSettings:
    """torchaudio.transforms.MelSpectrogram's arguments as LTX-2 sets them (the VAE config gives rate, hop, bins)."""

    sample_rate: int = 16000
    n_fft: int = 1024  # also win_length; ltx-core's AudioEncoder default (diffusers' config does not carry it)
    hop_length: int = 160
    mel_bins: int = 64

    @property
    def f_max(self) -> float:
        return self.sample_rate / 2.0

    def frames(self, samples: int) -> int:
        """Spectrogram frames of `samples` PCM samples (centred frames: one per hop, plus one)."""
        return samples // self.hop_length + 1

    def record(self) -> dict[str, Any]:
        return {"sample_rate": self.sample_rate, "n_fft": self.n_fft, "win_length": self.n_fft,
                "hop_length": self.hop_length, "n_mels": self.mel_bins, "f_min": 0.0, "f_max": self.f_max,
                "window": "hann (periodic)", "center": True, "pad_mode": "reflect", "power": 1.0,
                "mel_scale": "slaney", "norm": "slaney", "log": f"log(clamp(mel, min={LOG_FLOOR}))",
                "layout": "[batch, channels, frames, mel_bins]"}


def log_mel(waveform: torch.Tensor, settings: MelSettings) -> torch.Tensor:
    """[B, C, S] float32 PCM -> [B, C, frames, mel_bins] log-mel, on the waveform's device."""
    window = torch.hann_window(settings.n_fft, device=waveform.device)
    shape = waveform.shape
    spec = torch.stft(waveform.reshape(-1, shape[-1]), n_fft=settings.n_fft, hop_length=settings.hop_length,
                      win_length=settings.n_fft, window=window, center=True, pad_mode="reflect", normalized=False,
                      onesided=True, return_complex=True)
    magnitude = spec.reshape(shape[:-1] + spec.shape[-2:]).abs()  # [B, C, freqs, frames]
    fb = mel_filterbank(settings).to(waveform.device)
    mel = torch.matmul(magnitude.transpose(-1, -2), fb).transpose(-1, -2)
    mel = torch.log(torch.clamp(mel, min=LOG_FLOOR))
    return mel.permute(0, 1, 3, 2).contiguous()


def mel_filterbank(settings: MelSettings) -> torch.Tensor:
    """[freqs, mel_bins]: torchaudio's melscale_fbanks(norm="slaney", mel_scale="slaney"), f_min 0, f_max rate/2."""
    n_freqs = settings.n_fft // 2 + 1
    all_freqs = torch.linspace(0, settings.sample_rate // 2, n_freqs)
    m_pts = torch.linspace(_hz_to_mel(0.0), _hz_to_mel(settings.f_max), settings.mel_bins + 2)
    f_pts = _mel_to_hz(m_pts)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down_slopes = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up_slopes = slopes[:, 2:] / f_diff[1:]
    fb = torch.max(torch.zeros(1), torch.min(down_slopes, up_slopes))
    enorm = 2.0 / (f_pts[2: settings.mel_bins + 2] - f_pts[: settings.mel_bins])
    return fb * enorm.unsqueeze(0)


# Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above (step log(6.4) / 27)
_F_SP = 200.0 / 3
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = math.log(6.4) / 27.0


def _hz_to_mel(freq: float) -> float:
    if freq >= _MIN_LOG_HZ:
        return _MIN_LOG_MEL + math.log(freq / _MIN_LOG_HZ) / _LOGSTEP
    return freq / _F_SP


def _mel_to_hz(mels: torch.Tensor) -> torch.Tensor:
    freqs = _F_SP * mels
    log_t = mels >= _MIN_LOG_MEL
    freqs[log_t] = _MIN_LOG_HZ * torch.exp(_LOGSTEP * (mels[log_t] - _MIN_LOG_MEL))
    return freqs
