"""hunyuanvideo1.5 from the official release's vae/ folder or its safetensors file, against the official module.

The fixture (tests/tokenizers/fixtures/hunyuanvideo15_official_tiny.*, README there) was made by running
Tencent-Hunyuan/HunyuanVideo-1.5's own `AutoencoderKLConv3D` on a narrow config with seeded weights: its state-dict
names and shapes (the official key layout), its config.json, and its posterior mean and decoder output for a seeded
clip. Here the same weights, under the official names, are loaded through latentforge's route into diffusers'
`AutoencoderKLHunyuanVideo15` and must compute what the official module computed."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from helpers import REPO
from helpers.hunyuan15_seeded import seeded_weights, to_input
from helpers.tiny_diffusers_vaes import tiny_vae
from latentforge import registry
from latentforge.tokenizers.checkpoints import CheckpointError

FIXTURE = REPO / "tests" / "tokenizers" / "fixtures" / "hunyuanvideo15_official_tiny"
META = json.loads(FIXTURE.with_suffix(".json").read_text())
IO = load_file(FIXTURE.with_suffix(".io.safetensors"))
Tokenizer = registry.resolve("tokenizer", "hunyuanvideo1.5")


def official_folder(root: Path, config: dict | None = None, state: dict | None = None) -> Path:
    """`root`/vae as the official release lays it out: config.json and diffusion_pytorch_model.safetensors."""
    folder = root / "vae"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config or META["config"]))
    save_file(state if state is not None else seeded_weights(META["keys"], META["seed"]),
              folder / "diffusion_pytorch_model.safetensors")
    return folder


def assert_float32_close(found: torch.Tensor, official: torch.Tensor) -> None:
    """Equal up to float32 rounding: diffusers' class orders a few operations differently from the official module
    (measured where the fixture was made: 1.9e-6 on means up to 12, 1.8e-6 on pixels up to 2.6), and another CPU's
    kernels round differently again (1.5e-5 with PyTorch's unvectorised kernels); within 1e-5 of the largest value,
    where a misplaced tensor is off by the order of the values themselves."""
    assert found.shape == official.shape
    assert (found - official).abs().max() <= 1e-5 * official.abs().max()


def test_the_official_folder_encodes_and_decodes_as_the_official_module(tmp_path):
    tokenizer = Tokenizer(str(official_folder(tmp_path).parent))  # the release's root: its vae/ is found
    latent = tokenizer.encode(to_input(IO["pixels"]))
    assert latent.shape == IO["mean"].shape
    assert_float32_close(latent / META["config"]["scaling_factor"], IO["mean"])
    with torch.inference_mode():
        assert_float32_close(tokenizer.decode_model(IO["mean"]), IO["decoded"])
    fingerprint = tokenizer.fingerprint()
    weights = tmp_path / "vae" / "diffusion_pytorch_model.safetensors"
    assert fingerprint["checkpoint_format"] == "single-file"
    assert fingerprint["checkpoint_sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert fingerprint["scaling_factor"] == META["config"]["scaling_factor"]
    assert {k: fingerprint["architecture"][k] for k in ("spatial_compression_ratio", "temporal_compression_ratio",
                                                        "block_out_channels", "layers_per_block")} == {
        "spatial_compression_ratio": 16, "temporal_compression_ratio": 4, "block_out_channels": [8, 16, 32, 64, 64],
        "layers_per_block": 2}


def test_the_safetensors_file_alone_loads_with_the_config_beside_it_or_vae_config(tmp_path):
    folder = official_folder(tmp_path)
    weights = folder / "diffusion_pytorch_model.safetensors"
    video = to_input(IO["pixels"])
    expected = Tokenizer(str(folder)).encode(video)
    assert torch.equal(Tokenizer(str(weights)).encode(video), expected)
    lone = tmp_path / "hunyuanvideo15_vae.safetensors"
    shutil.copy(weights, lone)
    with pytest.raises(CheckpointError, match="its folder holds no config.json; set tokenizer.vae_config"):
        Tokenizer(str(lone))
    assert torch.equal(Tokenizer(str(lone), vae_config=str(folder / "config.json")).encode(video), expected)
    with pytest.raises(CheckpointError, match="official HunyuanVideo 1.5 vae/ folder with its own config.json"):
        Tokenizer(str(folder), vae_config=str(folder))


def test_the_hash_is_checked_before_any_weights_are_read(tmp_path, monkeypatch):
    folder = official_folder(tmp_path)
    monkeypatch.setattr(Tokenizer, "load_model", classmethod(lambda *_: pytest.fail("weights read before the hash")))
    with pytest.raises(CheckpointError, match="SHA-256 .* but 0{64} is required"):
        Tokenizer(str(folder), sha256="0" * 64)


def test_a_missing_tensor_is_named_as_the_official_file_names_it(tmp_path):
    state = seeded_weights(META["keys"], META["seed"])
    del state["decoder.up.1.block.2.conv1.conv.weight"]
    folder = official_folder(tmp_path, state=state)
    with pytest.raises(CheckpointError, match=r"1 missing keys: decoder\.up\.1\.block\.2\.conv1\.conv\.weight$"):
        Tokenizer(str(folder))


def test_a_file_of_another_model_is_refused_naming_its_keys(tmp_path):
    hunyuanvideo = {f"vae.{k}": v for k, v in tiny_vae("hunyuanvideo").state_dict().items()}
    folder = official_folder(tmp_path, state=hunyuanvideo)
    with pytest.raises(CheckpointError, match="is not a HunyuanVideo 1.5 VAE .*unexpected keys: decoder.conv_norm_out"):
        Tokenizer(str(folder))


def test_a_truncated_file_is_refused(tmp_path):
    weights = official_folder(tmp_path) / "diffusion_pytorch_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:50_000])
    with pytest.raises(CheckpointError, match="cannot read .* as a safetensors file .* truncated"):
        Tokenizer(str(weights.parent))


@pytest.mark.parametrize(("change", "message"), [
    ({"shift_factor": 0.5}, "sets shift_factor=0.5, which diffusers' AutoencoderKLHunyuanVideo15"),
    ({"tile_overlap": 0.25}, "has the unknown keys tile_overlap"),
    ({"ffactor_spatial": None}, "lacks ffactor_spatial"),
    ({"_class_name": "AutoencoderKLCausal3D"}, "is the config of AutoencoderKLCausal3D, not of AutoencoderKLConv3D"),
])
def test_an_official_config_diffusers_cannot_represent_is_refused(change, message, tmp_path):
    config = {k: v for k, v in {**META["config"], **change}.items() if v is not None or k == "shift_factor"}
    folder = official_folder(tmp_path, config=config)
    with pytest.raises(CheckpointError, match=message):
        Tokenizer(str(folder / "diffusion_pytorch_model.safetensors"))
