"""LTX-2's audio tokenizer (docs/audio.md): a tiny random AutoencoderKLLTX2Audio of the real architecture saved as a
diffusers folder; its fp32 latents equal, bit for bit, diffusers' own class called as LTX2Pipeline prepares audio
latents (posterior mode, _pack_audio_latents, _normalize_audio_latents) over the log-mel front end; that front end
equals torchaudio's MelSpectrogram where torchaudio is installed; the SHA-256 pin and the exact key check."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from diffusers import AutoencoderKLLTX2Audio
from diffusers.pipelines.ltx2.pipeline_ltx2 import LTX2Pipeline
from safetensors.torch import load_file, save_file

from helpers.tiny_audio_vae import MEL_BINS, tiny_audio_vae
from latentforge.config.raw_video_sections import AudioConfig
from latentforge.errors import ConfigError
from latentforge.tokenizers.checkpoints import CheckpointError, checkpoint_sha256, diffusers_folder
from latentforge.tokenizers.ltx.audio_mel import LOG_FLOOR, MelSettings, log_mel, mel_filterbank
from latentforge.tokenizers.ltx.ltx2_audio import LTX2AudioTokenizer

SAMPLES = 6000  # 9 frames at 24 fps, 16 kHz
FIXTURES = Path(__file__).with_name("fixtures")


@pytest.fixture(scope="module")
def pipeline_folder(tmp_path_factory):
    return tiny_audio_vae(tmp_path_factory.mktemp("ltx2"))


def audio_config(folder, **changes) -> AudioConfig:
    return AudioConfig(enabled=True, channels=2, tokenizer="ltx2-audio", checkpoint=str(folder), **changes)


def pcm(batch: int = 2) -> torch.Tensor:
    torch.manual_seed(3)
    return torch.rand(batch, SAMPLES, 2) * 2 - 1


def test_fp32_latents_equal_diffusers_class_called_as_the_pipeline(pipeline_folder):
    tokenizer = LTX2AudioTokenizer.from_config(audio_config(pipeline_folder), "cpu")
    ours = tokenizer.encode(pcm())

    reference = AutoencoderKLLTX2Audio.from_pretrained(pipeline_folder / "audio_vae").eval()
    mel = log_mel(pcm().transpose(1, 2), MelSettings(mel_bins=MEL_BINS))
    with torch.no_grad():
        mu = reference.encode(mel).latent_dist.mode()
        packed = LTX2Pipeline._pack_audio_latents(mu)
        normalized = LTX2Pipeline._normalize_audio_latents(packed, reference.latents_mean, reference.latents_std)
    expected = normalized.unflatten(2, (mu.shape[1], mu.shape[3])).transpose(1, 2)
    assert ours.shape == (2, 4, math.ceil((SAMPLES // 160 + 1) / 4), MEL_BINS // 4)
    assert torch.equal(ours, expected)
    shape, fingerprint = LTX2AudioTokenizer.describe(audio_config(pipeline_folder), SAMPLES)
    assert shape == tuple(ours.shape[1:])
    assert fingerprint["checkpoint_sha256"] == checkpoint_sha256(diffusers_folder(pipeline_folder, "", "audio_vae"))
    assert fingerprint["mel"]["n_fft"] == 1024 and fingerprint["mel"]["n_mels"] == MEL_BINS


def test_the_front_end_equals_torchaudio():
    """torchaudio's MelSpectrogram with LTX-2's settings, computed outside the project (fixtures/README.md), then
    LTX-2's log floor: ours within float32 rounding (another CPU may round its FFT and matmul otherwise)."""
    fixture = load_file(FIXTURES / "ltx2_audio_mel_torchaudio.safetensors")
    expected = torch.log(torch.clamp(fixture["mel"], min=LOG_FLOOR)).permute(0, 1, 3, 2)
    torch.testing.assert_close(log_mel(fixture["waveform"], MelSettings()), expected, rtol=1e-5, atol=1e-5)


def test_the_front_end_puts_a_tone_in_its_mel_band():
    rate, freq = 16000, 1000.0
    t = torch.arange(rate) / rate
    mel = log_mel(torch.sin(2 * math.pi * freq * t).view(1, 1, -1), MelSettings())
    assert mel.shape == (1, 1, rate // 160 + 1, 64)
    assert mel.min() >= math.log(LOG_FLOOR)
    fft_bin = round(freq / (rate / 1024))
    assert int(mel[0, 0, 50].argmax()) == int(mel_filterbank(MelSettings())[fft_bin].argmax())


def test_the_sha256_pin_and_the_exact_key_check(pipeline_folder, tmp_path):
    with pytest.raises(CheckpointError, match="audio.sha256"):
        LTX2AudioTokenizer.from_config(audio_config(pipeline_folder, sha256="0" * 64), "cpu")
    broken = tiny_audio_vae(tmp_path)
    weights = broken / "audio_vae" / "diffusion_pytorch_model.safetensors"
    state = load_file(weights)
    state["encoder.extra.weight"] = state.pop("encoder.conv_in.conv.weight")
    save_file(state, weights)
    with pytest.raises(CheckpointError, match="unexpected keys: encoder.extra.weight.*missing keys"):
        LTX2AudioTokenizer.from_config(audio_config(broken), "cpu")
    mono = AudioConfig(enabled=True, channels=1, tokenizer="ltx2-audio", checkpoint=str(pipeline_folder))
    with pytest.raises(ConfigError, match="audio.channels=2"):
        LTX2AudioTokenizer.describe(mono, SAMPLES)
