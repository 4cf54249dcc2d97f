"""The hunyuanvideo, hunyuanvideo1.5, ltx-video and ltx2 tokenizers against diffusers' own classes, run as their
pipelines run them: tiny random models of the real architectures saved with `save_pretrained`, loaded through our
checkpoint route, encoded and decoded bit for bit like diffusers' model plus the pipeline's latent normalisation."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import diffusers
import pytest
import torch
from diffusers import LTX2Pipeline, LTXPipeline

from helpers.tiny_diffusers_vaes import TINY_VAES, random_clip, reference_encode, save_tiny_vae
from latentforge import registry
from latentforge.config import TokenizerConfig
from latentforge.errors import ConfigError
from latentforge.tokenizers.checkpoints import CheckpointError

NAMES = list(TINY_VAES)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("vaes")
    return {name: save_tiny_vae(name, root / name, seed=i) for i, name in enumerate(NAMES)}


def reference_decode(name: str, vae, latent: torch.Tensor) -> torch.Tensor:
    """What the pipeline's decode step gives (decode_timestep 0, so no noise mixed in), clamped as postprocess."""
    if name.startswith("hunyuanvideo"):
        return vae.decode(latent / vae.config.scaling_factor).sample.clamp(-1, 1)
    pipeline = LTXPipeline if name == "ltx-video" else LTX2Pipeline
    z = pipeline._denormalize_latents(latent, vae.latents_mean, vae.latents_std, vae.config.scaling_factor)
    timestep = None
    if vae.config.timestep_conditioning:
        timestep = torch.tensor([0.0] * z.shape[0], dtype=z.dtype)
        scale = torch.tensor([0.0] * z.shape[0], dtype=z.dtype)[:, None, None, None, None]
        z = (1 - scale) * z + scale * torch.randn(z.shape)
    torch.manual_seed(0)  # the decoder's injected noise: the stream the tokenizer draws it from
    return vae.decode(z, timestep).sample.clamp(-1, 1)


@pytest.mark.parametrize("name", NAMES)
def test_fp32_encode_and_decode_equal_diffusers_bit_for_bit(name, folders):
    tokenizer = registry.resolve("tokenizer", name).from_config(
        TokenizerConfig(name=name, checkpoint=str(folders[name])), "cpu")
    reference = getattr(diffusers, TINY_VAES[name][0]).from_pretrained(folders[name]).eval()
    if name == "hunyuanvideo1.5":
        reference.enable_slicing()  # its attention's causal mask takes one clip per call
    video = random_clip(name, batch=2)
    with torch.no_grad():
        expected = reference_encode(name, reference, video)
        latent = tokenizer.encode(video)
        assert latent.dtype == torch.float32 and latent.shape == expected.shape
        assert list(latent.shape[1:]) == list(tokenizer.latent_shape(*video.shape[2:]))
        assert torch.equal(latent, expected)
        assert torch.equal(tokenizer.decode(latent), reference_decode(name, reference, latent))

    fingerprint = tokenizer.fingerprint()
    json.dumps(fingerprint)  # it goes into cache_config.json as it is
    assert fingerprint["scaling_factor"] == reference.config.scaling_factor
    assert fingerprint["checkpoint_format"] == "diffusers-folder"
    weights = (folders[name] / "diffusion_pytorch_model.safetensors").read_bytes()
    assert fingerprint["checkpoint_sha256"] == hashlib.sha256(weights).hexdigest()
    if name.startswith("ltx"):
        assert fingerprint["latents_mean"] == reference.latents_mean.tolist()
        assert fingerprint["latents_std"] == reference.latents_std.tolist()
        assert fingerprint["latents_std"] != [1.0] * 128  # the saved statistics, not the class's defaults


def test_pipeline_folder_loads_its_vae(folders, tmp_path):
    shutil.copytree(folders["hunyuanvideo"], tmp_path / "pipeline" / "vae")
    (tmp_path / "pipeline" / "model_index.json").write_text("{}")
    tokenizer = registry.resolve("tokenizer", "hunyuanvideo")(str(tmp_path / "pipeline"))
    assert tokenizer.source.path == tmp_path / "pipeline" / "vae"


def test_another_vae_class_is_refused(folders):
    with pytest.raises(CheckpointError, match="AutoencoderKLLTXVideo folder, not AutoencoderKLHunyuanVideo"):
        registry.resolve("tokenizer", "hunyuanvideo")(str(folders["ltx-video"]))
    with pytest.raises(CheckpointError, match="not AutoencoderKLLTXVideo"):
        registry.resolve("tokenizer", "ltx-video")(str(folders["ltx2"]))


def test_another_geometry_or_missing_tensors_are_refused(folders, tmp_path):
    save_tiny_vae("hunyuanvideo", tmp_path / "wide", latent_channels=32)
    with pytest.raises(CheckpointError, match=r"latent of \[32, 3, 2, 3\]; hunyuanvideo .* makes \[16, 3, 2, 3\]"):
        registry.resolve("tokenizer", "hunyuanvideo")(str(tmp_path / "wide"))
    save_tiny_vae("ltx-video", tmp_path / "acausal", encoder_causal=False)
    with pytest.raises(CheckpointError, match="encoder_causal"):
        registry.resolve("tokenizer", "ltx-video")(str(tmp_path / "acausal"))
    from safetensors.torch import load_file, save_file

    shutil.copytree(folders["ltx2"], tmp_path / "partial")
    weights = tmp_path / "partial" / "diffusion_pytorch_model.safetensors"
    state = load_file(weights)
    del state["latents_std"]
    state["extra.weight"] = torch.zeros(1)
    save_file(state, weights)
    with pytest.raises(CheckpointError, match="1 unexpected keys: extra.weight; 1 missing keys: latents_std"):
        registry.resolve("tokenizer", "ltx2")(str(tmp_path / "partial"))


def test_sha256_mismatch_is_refused_before_weights_are_read(folders, monkeypatch):
    cls = registry.resolve("tokenizer", "ltx-video")
    monkeypatch.setattr(cls, "load_model", classmethod(lambda *_: pytest.fail("weights read before the hash check")))
    with pytest.raises(CheckpointError, match="SHA-256 .* but 0{64} is required"):
        cls(str(folders["ltx-video"]), sha256="0" * 64)


def test_missing_checkpoint_and_other_precisions_are_refused(folders):
    cls = registry.resolve("tokenizer", "hunyuanvideo1.5")
    with pytest.raises(ConfigError, match="tokenizer.checkpoint is required for hunyuanvideo1.5"):
        cls.check_settings(TokenizerConfig(name="hunyuanvideo1.5"))
    with pytest.raises(ConfigError, match="precision='fp16' is not allowed for hunyuanvideo1.5; allowed: fp32, bf16"):
        cls.check_settings(TokenizerConfig(name="hunyuanvideo1.5", checkpoint="x", precision="fp16"))


@pytest.mark.parametrize(("name", "shape", "message"), [
    ("hunyuanvideo", (50, 480, 848), "use 49 or 53"),
    ("hunyuanvideo", (49, 540, 960), "height=540 is not divisible by the spatial factor 8 .* use 536 or 544"),
    ("hunyuanvideo1.5", (121, 480, 840), "width=840 .* factor 16 .* use 832 or 848"),
    ("ltx-video", (120, 512, 768), r"\(num_frames - 1\) % 8 == 0; use 113 or 121"),
    ("ltx2", (121, 500, 768), "height=500 .* factor 32 .* use 480 or 512"),
])
def test_geometry_errors_name_the_nearest_valid_sizes(name, shape, message):
    with pytest.raises(ConfigError, match=message):
        registry.resolve("tokenizer", name).check_geometry(*shape)
