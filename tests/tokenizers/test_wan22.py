"""The wan2.2 tokenizer against code we did not write: the official Wan2.2 VAE module (`vae2_2.py` of the wan22
wheel), diffusers' AutoencoderKLWan in its Wan2.2 configuration, PyAV for the frames and `sha256sum` for the hash."""

from __future__ import annotations

import subprocess
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from diffusers import AutoencoderKLWan
from huggingface_hub import constants as hub_constants

from helpers.media import pattern_frames, write_video
from helpers.wan_reference import TINY_WAN22, official_vae_module, tiny_official_wan22
from latentforge import registry
from latentforge.builder.estimate import output_shapes
from latentforge.config import TokenizerConfig
from latentforge.config.loading import load_config
from latentforge.errors import ConfigError
from latentforge.tokenizers.base import pixels_to_input
from latentforge.tokenizers.checkpoints import CheckpointError
from latentforge.tokenizers.wan import wan22_checkpoint
from latentforge.tokenizers.wan.common import WanOptions
from latentforge.tokenizers.wan.wan22 import Wan22Tokenizer
from latentforge.tokenizers.wan.wan22_checkpoint import LATENTS_MEAN, LATENTS_STD

FRAMES, HEIGHT, WIDTH = 9, 32, 48


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """(official WanVAE_ of vae2_2.py with random weights, its state dict saved as Wan2.2_VAE.pth)."""
    return tiny_official_wan22(tmp_path_factory.mktemp("official22"), seed=5)


def _scale() -> list[torch.Tensor]:
    # exactly Wan2_2_VAE.__init__'s scale (fp32)
    return [torch.tensor(list(LATENTS_MEAN)), 1.0 / torch.tensor(list(LATENTS_STD))]


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> torch.Tensor:
    """[1,3,T,H,W] in [-1,1]: frames of a tiny H.264 clip decoded by PyAV."""
    path = write_video(tmp_path_factory.mktemp("media") / "clip.mp4", pattern_frames(FRAMES, WIDTH, HEIGHT, seed=2))
    with av.open(str(path)) as container:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    assert frames.shape == (FRAMES, HEIGHT, WIDTH, 3)
    return pixels_to_input(frames, "cpu").unsqueeze(0)


@pytest.fixture(scope="module")
def fp32_tokenizer(official) -> Wan22Tokenizer:
    config = TokenizerConfig(name="wan2.2", checkpoint=str(official[1]))
    return registry.resolve("tokenizer", "wan2.2").from_config(config, "cpu")


@pytest.fixture(scope="module")
def fp32_reference(official, video) -> torch.Tensor:
    with torch.no_grad():
        return official[0].encode(video, _scale())


@pytest.fixture(scope="module")
def random_video() -> torch.Tensor:
    return torch.rand(2, 3, 5, 64, 32, generator=torch.Generator().manual_seed(1)) * 2 - 1


@pytest.fixture(scope="module")
def random_reference(official, random_video) -> torch.Tensor:
    with torch.no_grad():
        return official[0].encode(random_video, _scale())


def _sha256sum(path: Path) -> str:
    return subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]


def test_fp32_equals_official_encode_on_real_frames(fp32_tokenizer, fp32_reference, video):
    latent = fp32_tokenizer.encode(video)
    assert latent.dtype == torch.float32
    assert tuple(latent.shape) == (1, *Wan22Tokenizer.latent_shape(FRAMES, HEIGHT, WIDTH)) == (1, 48, 3, 2, 3)
    assert torch.equal(latent, fp32_reference)
    assert fp32_reference.std() > 0.1  # a live network, not constants


def test_fp32_equals_official_encode_on_random_input(fp32_tokenizer, random_video, random_reference):
    assert torch.equal(fp32_tokenizer.encode(random_video), random_reference)


def test_fp32_decode_equals_official_decode(fp32_tokenizer, fp32_reference, official):
    with torch.no_grad():
        expected = official[0].decode(fp32_reference, _scale()).clamp_(-1, 1)  # as Wan2_2_VAE.decode
    frames = fp32_tokenizer.decode(fp32_reference)
    assert frames.shape == (1, 3, FRAMES, HEIGHT, WIDTH)
    assert torch.equal(frames, expected)


def _diffusers_folder(official, folder: Path) -> Path:
    """The same weights as a diffusers AutoencoderKLWan (Wan2.2 configuration) written by save_pretrained."""
    config = wan22_checkpoint.diffusers_config(TINY_WAN22["dim"], TINY_WAN22["dec_dim"])
    model = AutoencoderKLWan.from_config(config)
    state = {wan22_checkpoint.wan_to_diffusers_key(k): v for k, v in official[0].state_dict().items()}
    model.load_state_dict(state, strict=True)
    model.save_pretrained(folder / "vae")
    return folder


def test_diffusers_folder_gives_the_same_bits(official, fp32_reference, video, random_video, random_reference,
                                             tmp_path):
    folder = _diffusers_folder(official, tmp_path)
    # diffusers' own module in its Wan2.2 configuration computes the official latent...
    with torch.no_grad():
        mu = AutoencoderKLWan.from_pretrained(folder / "vae").encode(video).latent_dist.mode()
    assert torch.equal((mu - _scale()[0].view(1, -1, 1, 1, 1)) * _scale()[1].view(1, -1, 1, 1, 1), fp32_reference)
    # ...and so does the folder loaded through our strict route (a pipeline folder: vae/ is found)
    tokenizer = Wan22Tokenizer(str(folder))
    assert torch.equal(tokenizer.encode(video), fp32_reference)
    assert torch.equal(tokenizer.encode(random_video), random_reference)
    fingerprint = tokenizer.fingerprint()
    assert fingerprint["checkpoint_format"] == "diffusers-folder"
    assert fingerprint["checkpoint_sha256"] == _sha256sum(folder / "vae" / "diffusion_pytorch_model.safetensors")


def test_hub_id_resolves_offline_from_the_hub_cache(official, fp32_reference, video, tmp_path, monkeypatch):
    # A hub cache as huggingface_hub lays it out: refs/main names the snapshot holding the files.
    repo = tmp_path / "hub" / "models--Wan-AI--Wan2.2-TI2V-5B-Diffusers"
    commit = "0123456789abcdef0123456789abcdef01234567"
    _diffusers_folder(official, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tokenizer = Wan22Tokenizer("Wan-AI/Wan2.2-TI2V-5B-Diffusers")
    assert torch.equal(tokenizer.encode(video), fp32_reference)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(CheckpointError, match=r"offline \(HF_HUB_OFFLINE=1\).*Wan2\.2_VAE\.pth"):
        Wan22Tokenizer("Wan-AI/Wan2.2-TI2V-5B-Diffusers")


def test_bf16_fast_path_is_no_worse_than_diffusers_bf16(official, video, fp32_reference, tmp_path):
    model = AutoencoderKLWan.from_pretrained(_diffusers_folder(official, tmp_path) / "vae").to(torch.bfloat16)
    with torch.no_grad():
        mu = model.encode(video.to(torch.bfloat16)).latent_dist.mode()
    theirs = (mu.float() - _scale()[0].view(1, -1, 1, 1, 1)) * _scale()[1].view(1, -1, 1, 1, 1)
    tokenizer = Wan22Tokenizer(str(official[1]), precision="bf16")
    ours = tokenizer.encode(video)
    assert torch.equal(tokenizer.encode(video), ours)  # the same bits again
    error, their_error = (((x - fp32_reference).norm() / fp32_reference.norm()).item() for x in (ours, theirs))
    assert 0 < error <= their_error < 0.05
    fingerprint = tokenizer.fingerprint()
    assert fingerprint["encoder_path"] == "latentforge fast (wan21_fast)"
    assert (fingerprint["conv_kernels"], fingerprint["max_gpu_mem_gib"], fingerprint["temporal_window"]) == (
        "plans", 24.0, None)


def test_bf16_refuses_recorded_plans_with_autotuning():
    config = TokenizerConfig(name="wan2.2", checkpoint="x.pth", precision="bf16",
                             options=WanOptions(cudnn_benchmark=True))
    with pytest.raises(ConfigError, match="recorded plans replace autotuning"):
        Wan22Tokenizer.check_settings(config)
    with pytest.raises(ConfigError, match="tokenizer.conv_kernels='fast'; allowed: plans, heuristics"):
        Wan22Tokenizer.check_settings(TokenizerConfig(name="wan2.2", checkpoint="x.pth",
                                                      options=WanOptions(conv_kernels="fast")))


def test_wrong_sha256_is_refused_naming_both_hashes(official):
    wrong = "f" * 64
    with pytest.raises(CheckpointError) as caught:
        Wan22Tokenizer(str(official[1]), sha256=wrong)
    assert wrong in str(caught.value) and _sha256sum(official[1]) in str(caught.value)
    assert Wan22Tokenizer.checkpoint_digest(str(official[1])) == _sha256sum(official[1])


def test_renamed_key_is_refused_naming_it(official, tmp_path):
    state = {k: torch.zeros(()).expand(v.shape) for k, v in official[0].state_dict().items()}
    state["encoder.downsamples.1.downsamples.2.resample.1.weights"] = state.pop(
        "encoder.downsamples.1.downsamples.2.resample.1.weight")
    torch.save(state, tmp_path / "renamed.pth")
    with pytest.raises(CheckpointError) as caught:
        Wan22Tokenizer(str(tmp_path / "renamed.pth"))
    message = str(caught.value)
    assert "not a Wan2.2 VAE" in message
    assert "1 unexpected keys: encoder.downsamples.1.downsamples.2.resample.1.weights" in message
    assert "1 missing keys: encoder.downsamples.1.downsamples.2.resample.1.weight" in message


def test_a_wan21_checkpoint_is_refused_naming_its_tokenizer(tmp_path):
    with torch.device("meta"):
        wan21 = official_vae_module().WanVAE_(dim=8, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                                              attn_scales=[], temperal_downsample=[False, True, True])
    torch.save({k: torch.zeros(()).expand(v.shape) for k, v in wan21.state_dict().items()}, tmp_path / "w21.pth")
    with pytest.raises(CheckpointError, match="is a Wan2.1 VAE.*use tokenizer.name wan2.1"):
        Wan22Tokenizer(str(tmp_path / "w21.pth"))
    (tmp_path / "folder").mkdir()
    AutoencoderKLWan.from_config({"base_dim": 8}).save_config(tmp_path / "folder")  # diffusers' Wan2.1 defaults
    (tmp_path / "folder" / "diffusion_pytorch_model.safetensors").write_bytes(b"never read")
    with pytest.raises(CheckpointError, match=r"not the Wan2\.2 VAE architecture.*'z_dim': 16"):
        Wan22Tokenizer(str(tmp_path / "folder"))


def test_key_map_covers_every_official_key_and_inverts(official):
    keys = list(official[0].state_dict())
    mapped = [wan22_checkpoint.wan_to_diffusers_key(k) for k in keys]
    config = wan22_checkpoint.diffusers_config(TINY_WAN22["dim"], TINY_WAN22["dec_dim"])
    with torch.device("meta"):
        expected = AutoencoderKLWan.from_config(config).state_dict()
    assert sorted(mapped) == sorted(expected) and len(mapped) == len(keys)
    assert [wan22_checkpoint.diffusers_to_wan_key(k) for k in mapped] == keys


def test_geometry_is_4x16x16_with_48_channels_and_checked_before_weights():
    assert Wan22Tokenizer.latent_shape(121, 704, 1280) == (48, 31, 44, 80)
    assert Wan22Tokenizer.latent_shape(93, 480, 832) == (48, 24, 30, 52)
    with pytest.raises(ConfigError, match="width=840 is not divisible by the spatial factor 16.*use 832 or 848"):
        Wan22Tokenizer.check_geometry(121, 704, 840)
    with pytest.raises(ConfigError, match="tokenizer.checkpoint is required for wan2.2"):
        Wan22Tokenizer.from_config(TokenizerConfig(name="wan2.2"), "cpu")
    with pytest.raises(ConfigError, match="allowed: fp32, bf16"):
        Wan22Tokenizer.check_settings(TokenizerConfig(name="wan2.2", checkpoint="x.pth", precision="cosmos-bf16"))


def test_ti2v_5b_preset_stacks_48_channels_per_modality(tmp_path):
    extra = {"dataset": {"reader": "table", "path": [str(tmp_path / "t.csv")], "mask_column": "mask",
                         "depth_column": "depth"},
             "modalities": {"names": ["rgb", "mask", "depth"]}, "tokenizer": {"checkpoint": "Wan2.2_VAE.pth"},
             "output": {"root": str(tmp_path / "cache"), "latent_dataset": "perception_latent_state"}}
    config = load_config(preset="wan2.2-ti2v-5b", extra=extra)
    assert (config.frames.num_frames, config.frames.height, config.frames.width, config.frames.fps) == (
        121, 704, 1280, "24")
    assert (config.tokenizer.name, config.text.name) == ("wan2.2", "umt5")
    assert output_shapes(config) == ((3 * 48, 31, 44, 80), (512, 4096))
