"""The Cosmos tokenizers' TorchScript routes: a released-style hub folder (encoder.jit + decoder.jit), a single
autoencoder.jit, their SHA-256 pinning (refused before any archive is read) and bad files. The archives are our
own modules traced (helpers/cosmos_models.py), holding the reference fixture's weights (no one else's archive is
shipped), so a load through the route must give the numbers NVIDIA/Cosmos-Tokenizer computed."""

from __future__ import annotations

import functools
import hashlib
import subprocess

import pytest
import torch

from helpers.cosmos_models import reference_fixture
from latentforge import registry
from latentforge.config import TokenizerConfig
from latentforge.demo.tiny_tokenizer import save_hub_folder, seeded_weights
from latentforge.errors import ConfigError
from latentforge.tokenizers.checkpoints import CheckpointError
from latentforge.tokenizers.cosmos.architecture import released
from latentforge.tokenizers.cosmos.checkpoint import resolve
from latentforge.tokenizers.cosmos.model import CosmosVideoAutoencoder


@functools.lru_cache
def _sha256sum(path) -> str:
    return subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]


@pytest.fixture(scope="module")
def cv_reference():
    """(our model with the CV fixture's weights, its video, the reference's recorded tensors)."""
    arch, weights, recorded = reference_fixture("cosmos_cv8x8x8_tiny")
    model = CosmosVideoAutoencoder(arch).eval()
    model.load_state_dict(weights, strict=True)
    return model, (recorded["pixels"].double() / 127.5 - 1.0).float(), recorded


@pytest.fixture(scope="module")
def cv_hub_folder(tmp_path_factory, cv_reference):
    return save_hub_folder(tmp_path_factory.mktemp("hub") / "Cosmos-Tokenizer-CV8x8x8", cv_reference[0],
                           parts=("encoder.jit", "decoder.jit", "autoencoder.jit"))


def _cv(checkpoint, **kwargs):
    return registry.resolve("tokenizer", "cosmos-cv8x8x8")(str(checkpoint), **kwargs)


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_a_hub_folder_gives_the_reference_latent_and_decode(cv_hub_folder, cv_reference):
    """Through the route: the module's own bits on this CPU, and the reference's recorded numbers within the fp32
    re-encode tolerance, 1e-5 (bit for bit on the CPU they were recorded on; another CPU rounds the float32
    convolutions differently: 1.5e-6 seen for the decode on an Intel CPU held to AVX2)."""
    model, video, recorded = cv_reference
    tokenizer = _cv(cv_hub_folder)
    latent, decoded = tokenizer.encode(video), tokenizer.decode(recorded["latent"])
    with torch.no_grad():
        assert torch.equal(latent, model.encode(video))
        assert torch.equal(decoded, model.decode(recorded["latent"]).clamp(-1, 1))
    assert _relative(latent, recorded["latent"]) <= 1e-5
    assert _relative(decoded, recorded["decoded"].clamp(-1, 1)) <= 1e-5
    fingerprint = tokenizer.fingerprint()
    assert fingerprint["checkpoint_format"] == "jit-folder"
    listing = "".join(f"{_sha256sum(cv_hub_folder / name)}  {name}\n" for name in ("decoder.jit", "encoder.jit"))
    assert fingerprint["checkpoint_sha256"] == hashlib.sha256(listing.encode()).hexdigest()
    assert fingerprint["architecture"]["channels"] == 2  # read from the weights


def test_a_single_autoencoder_jit_loads_every_weight(tmp_path):
    model = seeded_weights(CosmosVideoAutoencoder(released("CV", 8, 8).narrowed(2, (2, 4, 4), 1, 16)).eval(), seed=9)
    folder = save_hub_folder(tmp_path / "Cosmos-Tokenizer-CV8x8x8", model, parts=("autoencoder.jit",))
    video = torch.rand(1, 3, 9, 16, 16, generator=torch.Generator().manual_seed(10)) * 2 - 1
    tokenizer = _cv(folder / "autoencoder.jit")
    loaded = tokenizer.model.state_dict()
    assert loaded.keys() == model.state_dict().keys()
    assert all(torch.equal(loaded[k], v) for k, v in model.state_dict().items())
    with torch.no_grad():
        assert torch.equal(tokenizer.encode(video), model.encode(video))
    assert tokenizer.fingerprint()["checkpoint_format"] == "jit-file"
    assert tokenizer.fingerprint()["checkpoint_sha256"] == _sha256sum(folder / "autoencoder.jit")
    assert resolve(str(folder)).weight_files == (folder / "autoencoder.jit",)  # a folder holding only it


def test_bf16_needs_cuda_and_says_so_before_loading(cv_hub_folder):
    with pytest.raises(ConfigError, match="bf16 needs a CUDA device"):
        _cv(cv_hub_folder, precision="bf16")
    config = TokenizerConfig(name="cosmos-cv8x8x8", checkpoint=str(cv_hub_folder), precision="bf16")
    with pytest.raises(ConfigError, match="bf16 needs a CUDA device"):
        registry.resolve("tokenizer", "cosmos-cv8x8x8").preflight(config, "cpu")


def test_a_wrong_sha256_is_refused_before_any_archive_is_read(cv_hub_folder, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("torch.jit.load ran before the SHA-256 check")

    monkeypatch.setattr(torch.jit, "load", never)
    with pytest.raises(CheckpointError, match="SHA-256"):
        _cv(cv_hub_folder, sha256="ab" * 32)
    config = TokenizerConfig(name="cosmos-cv8x8x8", checkpoint=str(cv_hub_folder), sha256="ab" * 32)
    with pytest.raises(CheckpointError, match="SHA-256"):
        registry.resolve("tokenizer", "cosmos-cv8x8x8").preflight(config)


@pytest.mark.parametrize("case", ["corrupt", "not-jit", "half-folder", "empty-folder", "missing"])
def test_unusable_checkpoints_are_refused_with_advice(tmp_path, cv_hub_folder, case):
    if case == "corrupt":
        path = tmp_path / "autoencoder.jit"
        path.write_bytes(b"PK\x03\x04 not a real archive")
        match = "cannot read .* as a TorchScript archive"
    elif case == "not-jit":
        path = tmp_path / "model.pth"
        path.write_bytes(b"x")
        match = "not a TorchScript .jit file"
    elif case in ("half-folder", "empty-folder"):
        path = tmp_path / "folder"
        path.mkdir()
        if case == "half-folder":
            (path / "encoder.jit").write_bytes((cv_hub_folder / "encoder.jit").read_bytes())
        match = "neither encoder.jit \\+ decoder.jit"
    else:
        path, match = tmp_path / "nowhere", "does not exist"
    with pytest.raises(CheckpointError, match=match) as error:
        _cv(path)
    advice = "download it again" if case == "corrupt" else "huggingface-cli download nvidia/Cosmos-Tokenizer"
    assert advice in str(error.value)


def test_a_folder_named_for_another_variant_is_refused(cv_hub_folder):
    # CV8x8x8 and CV8x16x16 hold tensors of the same shapes: only the name tells them apart
    with pytest.raises(CheckpointError, match="names the CV8x8x8 tokenizer.*--tokenizer cosmos-cv8x8x8"):
        registry.resolve("tokenizer", "cosmos-cv8x16x16")(str(cv_hub_folder))


def test_dv_hub_folder_ids_codes_and_decode(tmp_path):
    arch = released("DV", 8, 16).narrowed(2, (2, 4, 4), 1, 16)
    model = seeded_weights(CosmosVideoAutoencoder(arch).eval(), seed=5)
    video = torch.rand(1, 3, 9, 16, 32, generator=torch.Generator().manual_seed(6)) * 2 - 1
    folder = save_hub_folder(tmp_path / "Cosmos-Tokenizer-DV8x16x16", model)
    tokenizer = registry.resolve("tokenizer", "cosmos-dv8x16x16").from_config(
        TokenizerConfig(name="cosmos-dv8x16x16", checkpoint=str(folder)), "cpu")
    with torch.no_grad():
        codes, ids = model.quantizer(model.encode(video))
        frames = model.decode(codes).clamp(-1, 1)
    assert torch.equal(tokenizer.encode_ids(video), ids.long())
    assert tuple(ids.shape) == (1, 2, 1, 2)
    stream = tokenizer.encode(video)  # what a cache stores: one id stream per modality
    assert tuple(stream.shape) == (1, *tokenizer.latent_shape(9, 16, 32)) == (1, 1, 2, 1, 2)
    assert torch.equal(stream[:, 0], ids.long()) and tokenizer.output == "tokens"
    assert torch.equal(tokenizer.decode(stream), frames)
    assert torch.equal(tokenizer.decode_ids(ids), frames)
    assert tokenizer.vocabulary == 64000 and tokenizer.fingerprint()["fsq_levels"] == [8, 8, 8, 5, 5, 5]
    with pytest.raises(ConfigError, match="token ids"):
        tokenizer.decode_ids(torch.full((1, 2, 1, 2), 64000))


@pytest.mark.parametrize("name, frames, size, message", [
    ("cosmos-cv8x8x8", 13, 16, "num_frames=13.*use 9 or 17"),
    ("cosmos-cv4x8x8", 7, 16, "num_frames=7.*use 5 or 9"),
    ("cosmos-dv8x16x16", 9, 24, "height=24 is not divisible by the spatial factor 16"),
])
def test_geometry_is_checked_from_the_class_alone(name, frames, size, message):
    cls = registry.resolve("tokenizer", name)
    with pytest.raises(ConfigError, match=message):
        cls.check_geometry(frames, size, size)


def test_registered_geometry_and_channels():
    shapes = {name: (registry.resolve("tokenizer", name).latent_shape(17, 64, 64))
              for name in ("cosmos-cv4x8x8", "cosmos-cv8x8x8", "cosmos-cv8x16x16",
                           "cosmos-dv4x8x8", "cosmos-dv8x8x8", "cosmos-dv8x16x16")}
    assert shapes == {"cosmos-cv4x8x8": (16, 5, 8, 8), "cosmos-cv8x8x8": (16, 3, 8, 8),
                      "cosmos-cv8x16x16": (16, 3, 4, 4), "cosmos-dv4x8x8": (1, 5, 8, 8),
                      "cosmos-dv8x8x8": (1, 3, 8, 8), "cosmos-dv8x16x16": (1, 3, 4, 4)}
    with pytest.raises(ConfigError, match="tokenizer.checkpoint is required"):
        registry.resolve("tokenizer", "cosmos-cv8x8x8").check_settings(TokenizerConfig(name="cosmos-cv8x8x8"))
    with pytest.raises(ConfigError, match="cosmos-bf16"):
        registry.resolve("tokenizer", "cosmos-dv8x8x8").check_settings(
            TokenizerConfig(name="cosmos-dv8x8x8", checkpoint="x", precision="cosmos-bf16"))
