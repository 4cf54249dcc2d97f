"""The ltx-video and ltx2 tokenizers from official single files, against diffusers: a tiny model of the released
architecture written under the official keys (tests/helpers/original_vae_layout.py, checked by diffusers' own
`from_single_file`) into one .safetensors, loaded through our route, encodes to the bits of the diffusers folder.
The HunyuanVideo VAEs' official files, which diffusers cannot convert, are tested in
tests/tokenizers/test_hunyuanvideo_official.py and test_hunyuanvideo15_official.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import diffusers
import pytest
import torch
from safetensors.torch import save_file

from helpers.original_vae_layout import original_state_dict
from helpers.tiny_diffusers_vaes import TINY_VAES, random_clip, save_tiny_vae, tiny_vae
from latentforge import registry
from latentforge.config import TokenizerConfig
from latentforge.tokenizers.checkpoints import CheckpointError
from latentforge.tokenizers.diffusers_vae import DiffusersVaeOptions

# LTX-Video 0.9.1's decoder (three up blocks, each after an upsampler halving the width, noise injected), whose
# official keys diffusers' conversion tells apart by the decoder's `last_time_embedder`
LTX_VIDEO_091 = {"decoder_block_out_channels": (8, 16, 32), "decoder_layers_per_block": (1, 1, 1, 1),
                 "decoder_spatio_temporal_scaling": (True, True, True),
                 "decoder_inject_noise": (True, True, True, False), "upsample_residual": (True, True, True),
                 "upsample_factor": (2, 2, 2)}
RELEASES = {"ltx-video": LTX_VIDEO_091, "ltx2": {}}


def write_single_file(name: str, root: Path, whole_model: bool = True) -> tuple[Path, Path]:
    """(the diffusers folder, the official-layout file of the same weights); a whole-model file also holds
    transformer tensors under `model.diffusion_model.`, a VAE-only one has no `vae.` prefix."""
    folder = save_tiny_vae(name, root / name, **RELEASES[name])
    state = original_state_dict(name, tiny_vae(name, **RELEASES[name]), "vae." if whole_model else "")
    if whole_model:
        state["model.diffusion_model.proj_in.weight"] = torch.ones(4, 4)
    path = root / f"{name}-{'whole' if whole_model else 'vae'}.safetensors"
    save_file(state, path)
    return folder, path


@pytest.mark.parametrize("name", list(RELEASES))
def test_the_official_key_layout_is_what_diffusers_from_single_file_reads(name, tmp_path):
    folder, path = write_single_file(name, tmp_path)
    reference = getattr(diffusers, TINY_VAES[name][0]).from_single_file(str(path), config=str(folder),
                                                                       local_files_only=True)
    expected = tiny_vae(name, **RELEASES[name]).state_dict()
    loaded = reference.state_dict()
    assert loaded.keys() == expected.keys()
    assert all(torch.equal(loaded[k], expected[k]) for k in expected)


@pytest.mark.parametrize(("name", "whole_model"), [("ltx-video", True), ("ltx2", True), ("ltx2", False)])
def test_single_file_encodes_like_the_diffusers_folder_bit_for_bit(name, whole_model, tmp_path):
    folder, path = write_single_file(name, tmp_path, whole_model)
    cls = registry.resolve("tokenizer", name)
    from_folder = cls.from_config(TokenizerConfig(name=name, checkpoint=str(folder)), "cpu")
    options = DiffusersVaeOptions(vae_config=str(folder))
    from_file = cls.from_config(TokenizerConfig(name=name, checkpoint=str(path), options=options), "cpu")
    video = random_clip(name, batch=2)
    latent = from_file.encode(video)
    assert torch.equal(latent, from_folder.encode(video))
    assert torch.equal(from_file.decode(latent), from_folder.decode(latent))
    fingerprint = from_file.fingerprint()
    assert fingerprint["checkpoint_format"] == "single-file"
    assert fingerprint["checkpoint_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert fingerprint["architecture"] == from_folder.fingerprint()["architecture"]
    assert fingerprint["latents_std"] == from_folder.fingerprint()["latents_std"]


def test_single_file_needs_a_local_config_and_matching_hash(tmp_path, monkeypatch):
    folder, path = write_single_file("ltx2", tmp_path)
    cls = registry.resolve("tokenizer", "ltx2")
    with pytest.raises(CheckpointError, match="holds no diffusers config; set tokenizer.vae_config"):
        cls(str(path))
    with pytest.raises(CheckpointError, match="vae_config='/nowhere' is not a folder with config.json"):
        cls(str(path), vae_config="/nowhere")
    with pytest.raises(CheckpointError, match="is a diffusers folder with its own config.json; unset"):
        cls(str(folder), vae_config=str(folder))
    monkeypatch.setattr(cls, "load_model", classmethod(lambda *_: pytest.fail("weights read before the hash check")))
    with pytest.raises(CheckpointError, match="SHA-256 .* but 0{64} is required"):
        cls(str(path), sha256="0" * 64, vae_config=str(folder / "config.json"))


def test_a_file_of_another_model_is_refused_naming_its_keys(tmp_path):
    folder, _ = write_single_file("ltx-video", tmp_path)
    path = tmp_path / "other.safetensors"
    save_file({"vae.encoder.conv_in.weight": torch.zeros(1)}, path)
    with pytest.raises(CheckpointError, match="needs the key 'vae.encoder.conv_out.conv.weight'"):
        registry.resolve("tokenizer", "ltx-video")(str(path), vae_config=str(folder))
    _, ltx2_file = write_single_file("ltx2", tmp_path)
    with pytest.raises(CheckpointError, match="is not a LTX-Video VAE .*unexpected keys"):
        registry.resolve("tokenizer", "ltx-video")(str(ltx2_file), vae_config=str(folder))
