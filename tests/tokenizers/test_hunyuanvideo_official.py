"""hunyuanvideo from the official `hunyuan-video-t2v-720p/vae/pytorch_model.pt`, against diffusers.

The official file is a torch pickle of diffusers' own key names (diffusers' conversion script loads it with an empty
rename map, strictly), wrapped in `state_dict` and prefixed `vae.` in the training checkpoints the official loader
also reads. A tiny random AutoencoderKLHunyuanVideo written in those forms, loaded through latentforge, encodes to
the bits of diffusers' `from_pretrained` of the same weights; files that are not such a checkpoint are refused."""

from __future__ import annotations

import hashlib
import json

import diffusers
import pytest
import torch

from helpers.tiny_diffusers_vaes import random_clip, reference_encode, save_tiny_vae
from latentforge import registry
from latentforge.tokenizers.checkpoints import CheckpointError

Tokenizer = registry.resolve("tokenizer", "hunyuanvideo")
NAME = "hunyuanvideo"


def official_config(model) -> dict:
    """The official AutoencoderKLCausal3D config.json of `model`'s architecture (the release's keys)."""
    c = model.config
    return {"_class_name": "AutoencoderKLCausal3D", "_diffusers_version": "0.4.2", "act_fn": c.act_fn,
            "block_out_channels": list(c.block_out_channels), "in_channels": c.in_channels,
            "latent_channels": c.latent_channels, "layers_per_block": c.layers_per_block,
            "norm_num_groups": c.norm_num_groups, "out_channels": c.out_channels, "sample_size": 256,
            "sample_tsize": 64, "scaling_factor": c.scaling_factor, "time_compression_ratio": 4,
            "mid_block_add_attention": True,
            "down_block_types": ["DownEncoderBlockCausal3D"] * len(c.block_out_channels),
            "up_block_types": ["UpDecoderBlockCausal3D"] * len(c.block_out_channels)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """(diffusers folder, diffusers' from_pretrained of it, its latent of the test clip)."""
    folder = save_tiny_vae(NAME, tmp_path_factory.mktemp("diffusers") / NAME)
    model = diffusers.AutoencoderKLHunyuanVideo.from_pretrained(folder).eval()
    with torch.no_grad():
        latent = reference_encode(NAME, model, random_clip(NAME, batch=2))
    return folder, model, latent


@pytest.mark.parametrize("wrapped", [True, False])
def test_the_official_pickle_encodes_like_diffusers_from_pretrained_bit_for_bit(wrapped, reference, tmp_path):
    folder, model, expected = reference
    state = model.state_dict()
    path = tmp_path / "pytorch_model.pt"
    torch.save({"state_dict": {f"vae.{k}": v for k, v in state.items()}} if wrapped else state, path)
    tokenizer = Tokenizer(str(path), vae_config=str(folder))
    assert torch.equal(tokenizer.encode(random_clip(NAME, batch=2)), expected)
    fingerprint = tokenizer.fingerprint()
    assert fingerprint["checkpoint_format"] == "single-file"
    assert fingerprint["checkpoint_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_official_vae_folder_reads_its_own_config(reference, tmp_path):
    folder, model, expected = reference
    vae = tmp_path / "hunyuan-video-t2v-720p" / "vae"
    vae.mkdir(parents=True)
    (vae / "config.json").write_text(json.dumps(official_config(model)))
    torch.save(model.state_dict(), vae / "pytorch_model.pt")
    from_folder = Tokenizer(str(vae.parent))
    assert torch.equal(from_folder.encode(random_clip(NAME, batch=2)), expected)
    from_file = Tokenizer(str(vae / "pytorch_model.pt"))  # the config.json beside it
    assert from_file.fingerprint() == from_folder.fingerprint()
    diffusers_config = Tokenizer(str(folder)).fingerprint()["architecture"]
    assert from_folder.fingerprint()["architecture"] == diffusers_config


def test_a_lone_file_needs_a_config_and_the_hash_comes_first(reference, tmp_path, monkeypatch):
    folder, model, _ = reference
    path = tmp_path / "pytorch_model.pt"
    torch.save(model.state_dict(), path)
    with pytest.raises(CheckpointError, match="its folder holds no config.json; set tokenizer.vae_config"):
        Tokenizer(str(path))
    assert Tokenizer.checkpoint_digest(str(path)) == hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setattr(Tokenizer, "load_model", classmethod(lambda *_: pytest.fail("weights read before the hash")))
    with pytest.raises(CheckpointError, match="SHA-256 .* but 0{64} is required"):
        Tokenizer(str(path), sha256="0" * 64, vae_config=str(folder))


class RunsCode:
    ran = False

    def __reduce__(self):
        return (_mark_ran, ())


def _mark_ran():
    RunsCode.ran = True
    return {}


def test_a_pickle_that_would_run_code_is_refused_without_running_it(reference, tmp_path):
    folder, model, _ = reference
    path = tmp_path / "pytorch_model.pt"
    torch.save({"state_dict": model.state_dict(), "hook": RunsCode()}, path)
    with pytest.raises(CheckpointError, match="loading it would run code it holds, which latentforge refuses"):
        Tokenizer(str(path), vae_config=str(folder))
    assert not RunsCode.ran


def test_wrong_keys_are_named(reference, tmp_path):
    folder, model, _ = reference
    state = {k.replace("encoder.conv_in.", "encoder.conv_first."): v for k, v in model.state_dict().items()}
    path = tmp_path / "pytorch_model.pt"
    torch.save({"state_dict": state}, path)
    with pytest.raises(CheckpointError, match=r"is not a HunyuanVideo VAE \(single-file\): 2 unexpected keys: "
                                              r"encoder\.conv_first\.conv\.bias.*2 missing keys: encoder\.conv_in"):
        Tokenizer(str(path), vae_config=str(folder))


@pytest.mark.parametrize(("content", "message"), [
    (b"not a checkpoint", "cannot read .* as a PyTorch checkpoint .* truncated or not a checkpoint"),
    ("truncated", "cannot read .* as a PyTorch checkpoint .* truncated or not a checkpoint"),
    ({"state_dict": {"vae.scale": 0.5}}, "does not hold a state dict of tensors"),
])
def test_unreadable_or_foreign_files_are_refused(content, message, reference, tmp_path):
    folder, model, _ = reference
    path = tmp_path / "pytorch_model.pt"
    if content == "truncated":
        torch.save(model.state_dict(), path)
        path.write_bytes(path.read_bytes()[:20_000])
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    with pytest.raises(CheckpointError, match=message):
        Tokenizer(str(path), vae_config=str(folder))


def test_an_official_config_of_other_block_types_is_refused(reference, tmp_path):
    _, model, _ = reference
    config = {**official_config(model), "down_block_types": ["DownEncoderBlock2D"] * 4}
    (tmp_path / "config.json").write_text(json.dumps(config))
    torch.save(model.state_dict(), tmp_path / "pytorch_model.pt")
    with pytest.raises(CheckpointError, match="names the block type 'DownEncoderBlock2D'"):
        Tokenizer(str(tmp_path))
