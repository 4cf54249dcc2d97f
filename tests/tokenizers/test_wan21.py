"""The wan2.1 tokenizer against code we did not write: the official Wan2.1 VAE module (wan22 wheel),
Cosmos-Predict2's tokenizer wrapper (cosmos-predict2 wheel), diffusers' own Wan key converter and bf16
path, PyAV for the frames and `sha256sum` for the hash."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from diffusers import AutoencoderKLWan
from diffusers.loaders.single_file_utils import convert_wan_vae_to_diffusers
from PIL import Image, ImageDraw

from helpers.wan_reference import cosmos_tokenizer_interface, official_vae_module, randomise_parameters
from latentforge import registry
from latentforge.config import TokenizerConfig
from latentforge.errors import ConfigError
from latentforge.tokenizers.base import pixels_to_input
from latentforge.tokenizers.checkpoints import CheckpointError
from latentforge.tokenizers.wan import wan21_checkpoint
from latentforge.tokenizers.wan.common import HEURISTICS_MODE_B_ENV, WanOptions, prepare_fast_path
from latentforge.tokenizers.wan.wan21 import LATENTS_MEAN, LATENTS_STD, Wan21Tokenizer

FRAMES, HEIGHT, WIDTH = 9, 16, 32
# The Wan2.1 architecture at width 16 (released: 96): the loader reads the width from the weights, and bf16
# convolutions on a CPU without bf16 instructions run ~55x slower than fp32, so no test runs the full width in bf16
WAN21 = dict(dim=16, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
             temperal_downsample=[False, True, True], dropout=0.0)  # fmt: skip


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """(official WanVAE_ with random weights, its state dict saved with torch.save as Wan2.1_VAE.pth)."""
    with torch.device("meta"):
        model = official_vae_module().WanVAE_(**WAN21)
    model = model.to_empty(device="cpu").eval().requires_grad_(False)  # every tensor is set just below
    randomise_parameters(model, seed=3)
    path = tmp_path_factory.mktemp("official") / "Wan2.1_VAE.pth"
    torch.save(model.state_dict(), path)
    return model, path


def _scale(dtype=torch.float32) -> list[torch.Tensor]:
    # exactly Wan2_1_VAE.__init__'s scale
    mean = torch.tensor(list(LATENTS_MEAN), dtype=dtype)
    return [mean, 1.0 / torch.tensor(list(LATENTS_STD), dtype=dtype)]


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> torch.Tensor:
    """[1,3,T,H,W] in [-1,1]: a tiny H.264 clip (moving gradient + text) decoded by PyAV."""
    path = tmp_path_factory.mktemp("media") / "clip.mp4"
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=16)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for t in range(FRAMES):
            rgb = np.stack([xx * 5 + t * 9, yy * 7, 128 + 100 * np.sin((xx + yy + 3 * t) / 6)], axis=-1)
            image = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
            ImageDraw.Draw(image).text((2 + t, 10), "LF", fill=(255, 255, 255))
            container.mux(stream.encode(av.VideoFrame.from_image(image)))
        container.mux(stream.encode())
    with av.open(str(path)) as container:
        frames = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    assert frames.shape == (FRAMES, HEIGHT, WIDTH, 3)
    return pixels_to_input(frames, "cpu").unsqueeze(0)


@pytest.fixture(scope="module")
def fp32_tokenizer(official) -> Wan21Tokenizer:
    config = TokenizerConfig(name="wan2.1", checkpoint=str(official[1]))
    return registry.resolve("tokenizer", "wan2.1").from_config(config, "cpu")


@pytest.fixture(scope="module")
def fp32_reference(official, video) -> torch.Tensor:
    with torch.no_grad():
        return official[0].encode(video, _scale())


def _diffusers_model(pth: Path) -> AutoencoderKLWan:
    with torch.device("meta"):
        model = AutoencoderKLWan(base_dim=WAN21["dim"])
    state = convert_wan_vae_to_diffusers(torch.load(pth, weights_only=True))
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()


@functools.lru_cache
def _sha256sum(path: Path) -> str:
    return subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]


def test_fp32_official_pth_equals_official_encode(fp32_tokenizer, fp32_reference, video):
    latent = fp32_tokenizer.encode(video)
    assert latent.dtype == torch.float32
    assert tuple(latent.shape) == (1, *Wan21Tokenizer.latent_shape(FRAMES, HEIGHT, WIDTH)) == (1, 16, 3, 2, 4)
    assert torch.equal(latent, fp32_reference)
    assert fp32_reference.std() > 0.1  # a live network, not constants


def test_fp32_decode_equals_official_decode(fp32_tokenizer, fp32_reference, official):
    latent = fp32_reference[:, :, :2, :2, :3]  # 5 frames of 16x24: the decoder is the costly half
    with torch.no_grad():
        expected = official[0].decode(latent, _scale()).clamp_(-1, 1)  # as Wan2_1_VAE.decode
    frames = fp32_tokenizer.decode(latent)
    assert frames.shape == (1, 3, 5, 16, 24)
    assert torch.equal(frames, expected)


def test_diffusers_folder_gives_the_same_bits(official, fp32_reference, video, tmp_path):
    # The folder is written by diffusers' own Wan converter, not by our key map.
    model = _diffusers_model(official[1])
    model.save_pretrained(tmp_path / "vae")
    tokenizer = Wan21Tokenizer(str(tmp_path), precision="fp32")  # a pipeline folder: finds vae/
    assert torch.equal(tokenizer.encode(video), fp32_reference)
    weights = tmp_path / "vae" / "diffusion_pytorch_model.safetensors"
    assert tokenizer.fingerprint()["checkpoint_sha256"] == _sha256sum(weights)
    assert tokenizer.fingerprint()["checkpoint_format"] == "diffusers-folder"


@pytest.mark.parametrize("temporal_window", [16, 4])
def test_cosmos_bf16_equals_cosmos_wrapper(official, video, fp32_reference, temporal_window):
    cosmos = cosmos_tokenizer_interface(official[1], temporal_window, dim=WAN21["dim"])
    expected = cosmos.encode(video)  # T=9 with window 16: frame 0, then the 8-frame remainder pass
    tokenizer = Wan21Tokenizer(str(official[1]), precision="cosmos-bf16", temporal_window=temporal_window)
    latent = tokenizer.encode(video)
    assert latent.dtype == expected.dtype == torch.float32
    assert torch.equal(latent, expected)
    assert not torch.equal(latent, fp32_reference)  # the mode really is bf16


def test_bf16_is_no_worse_than_diffusers_bf16(official, video, fp32_reference):
    model = _diffusers_model(official[1]).to(torch.bfloat16)
    with torch.no_grad():
        mu = model.encode(video.to(torch.bfloat16)).latent_dist.mode()
    mean, inv_std = (c.view(1, -1, 1, 1, 1).to(torch.bfloat16) for c in _scale())
    theirs = ((mu - mean) * inv_std).float()
    ours = Wan21Tokenizer(str(official[1]), precision="bf16").encode(video)

    def relative_l2(latent):
        return ((latent - fp32_reference).norm() / fp32_reference.norm()).item()

    assert 0 < relative_l2(ours) <= relative_l2(theirs) < 0.05


def test_fingerprint_holds_the_sha256sum_and_no_path(fp32_tokenizer, official):
    fingerprint = fp32_tokenizer.fingerprint()
    assert fingerprint["checkpoint_sha256"] == _sha256sum(official[1])
    assert fingerprint["precision"] == "fp32" and fingerprint["temporal_window"] == 4
    assert fingerprint["latents_mean"] == list(LATENTS_MEAN) and fingerprint["latents_std"] == list(LATENTS_STD)
    assert str(official[1].parent) not in json.dumps(fingerprint)


def test_wrong_sha256_is_refused_before_any_model_load(official, monkeypatch):
    calls = []
    original_init, original_load = AutoencoderKLWan.__init__, torch.load

    def counting_init(self, *args, **kwargs):
        calls.append("model")
        original_init(self, *args, **kwargs)

    def counting_load(*args, **kwargs):
        calls.append("torch.load")
        return original_load(*args, **kwargs)

    monkeypatch.setattr(AutoencoderKLWan, "__init__", counting_init)
    monkeypatch.setattr(torch, "load", counting_load)
    wrong = "0" * 64
    with pytest.raises(CheckpointError) as caught:
        Wan21Tokenizer(str(official[1]), sha256=wrong)
    assert wrong in str(caught.value) and _sha256sum(official[1]) in str(caught.value)
    assert calls == []


def _shape_only_state(official, rename: dict[str, str]) -> dict[str, torch.Tensor]:
    # zero-stride tensors: the official key set and shapes at a few bytes on disk
    return {rename.get(k, k): torch.zeros(()).expand(v.shape) for k, v in official[0].state_dict().items()}


def test_renamed_key_is_refused_naming_it(official, tmp_path):
    path = tmp_path / "renamed.pth"
    torch.save(_shape_only_state(official, {"encoder.head.2.weight": "encoder.head.2.weights"}), path)
    with pytest.raises(CheckpointError) as caught:
        Wan21Tokenizer(str(path))
    message = str(caught.value)
    assert "1 unexpected keys: encoder.head.2.weights" in message
    assert "1 missing keys: encoder.head.2.weight" in message


def test_wrong_shape_is_refused_naming_it(official, tmp_path):
    state = _shape_only_state(official, {})
    state["encoder.middle.1.to_qkv.weight"] = torch.zeros(()).expand(1152, 384, 1)
    torch.save(state, tmp_path / "shape.pth")
    with pytest.raises(CheckpointError, match=r"encoder\.middle\.1\.to_qkv\.weight \[1152, 384, 1\]"):
        Wan21Tokenizer(str(tmp_path / "shape.pth"))


def test_key_map_agrees_with_diffusers_converter(official):
    keys = list(official[0].state_dict())
    converted = convert_wan_vae_to_diffusers({k: torch.zeros(1) for k in keys})
    ours = {wan21_checkpoint.wan_to_diffusers_key(k) for k in keys}
    assert ours == set(converted) and len(ours) == 194
    assert [wan21_checkpoint.diffusers_to_wan_key(wan21_checkpoint.wan_to_diffusers_key(k)) for k in keys] == keys


@pytest.mark.parametrize(("frames", "advice"), [(8, "use 5 or 9"), (10, "use 9 or 13")])
def test_encode_refuses_frames_that_official_wan_would_drop(fp32_tokenizer, frames, advice):
    with pytest.raises(ConfigError, match=r"\(num_frames - 1\) % 4 == 0; " + advice):
        fp32_tokenizer.encode(torch.zeros(1, 3, frames, HEIGHT, WIDTH))


def test_config_errors_need_no_weights():
    with pytest.raises(ConfigError, match="tokenizer.checkpoint is required"):
        Wan21Tokenizer.from_config(TokenizerConfig(name="wan2.1"), "cpu")
    with pytest.raises(ConfigError, match="allowed: fp32, bf16, cosmos-bf16"):
        Wan21Tokenizer("unused.pth", precision="fp16")
    with pytest.raises(CheckpointError, match="does not exist"):
        Wan21Tokenizer("no/such/Wan2.1_VAE.pth")


def test_kernel_settings_are_checked_before_any_gpu_work(monkeypatch):
    cfg = TokenizerConfig(name="wan2.1", checkpoint="unused.pth", precision="bf16")
    with pytest.raises(ConfigError, match="tokenizer.conv_kernels='fastest'; allowed: plans, heuristics"):
        Wan21Tokenizer.check_settings(dataclasses.replace(cfg, options=WanOptions(conv_kernels="fastest")))
    with pytest.raises(ConfigError, match="cudnn_benchmark=true with tokenizer.conv_kernels=plans"):
        Wan21Tokenizer.check_settings(dataclasses.replace(cfg, options=WanOptions(cudnn_benchmark=True)))
    Wan21Tokenizer.check_settings(dataclasses.replace(cfg, options=WanOptions(cudnn_benchmark=True,
                                                                              conv_kernels="heuristics")))
    # a GPU build with plans needs the cuDNN frontend: the pre-flight says so before reading any weights
    monkeypatch.setitem(sys.modules, "cudnn", None)  # not importable, whether installed here or not
    with pytest.raises(ConfigError, match=r"needs the cuDNN frontend.*latentforge\[gpu\].*conv_kernels=heuristics"):
        Wan21Tokenizer.preflight(cfg, "cuda")
    on_cpu = dataclasses.replace(cfg, options=WanOptions(allow_slow_cpu_bf16=True))  # tests/tokenizers/test_cpu_bf16.py
    with pytest.raises(CheckpointError, match="does not exist"):  # on the CPU no plans run: the weights are next
        Wan21Tokenizer.preflight(on_cpu, "cpu")


@pytest.mark.parametrize("precision,device", [("bf16", "cuda"), ("bf16", "cpu"), ("fp32", "cuda"),
                                              ("cosmos-bf16", "cuda")])
def test_a_rank_sets_only_the_variables_its_resume_check_expects(precision, device, monkeypatch):
    """A resume compares the environment its ranks will record before any of them loads the model
    (builder/resume.py): the variables a rank sets before loading are the ones process_environment names."""
    monkeypatch.setenv(HEURISTICS_MODE_B_ENV, "")
    monkeypatch.delenv(HEURISTICS_MODE_B_ENV)  # unset, and as it was again after the test
    before = dict(os.environ)
    if precision == "bf16":  # as Wan21Tokenizer.__init__, which takes the fast path for bf16 only
        prepare_fast_path(device, "heuristics")
    set_by_the_rank = {k: v for k, v in os.environ.items() if before.get(k) != v}
    cfg = TokenizerConfig(name="wan2.1", checkpoint="unused.pth", precision=precision)
    assert Wan21Tokenizer.process_environment(cfg, device) == set_by_the_rank
    assert bool(set_by_the_rank) == ((precision, device) == ("bf16", "cuda"))


def test_hub_id_offline_names_the_file_to_pass(tmp_path):
    src = str(Path(wan21_checkpoint.__file__).parents[3])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    code = ("from latentforge.tokenizers.wan.wan21 import Wan21Tokenizer; "
            "Wan21Tokenizer('Wan-AI/Wan2.1-T2V-1.3B-Diffusers')")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "CheckpointError" in result.stderr and "offline (HF_HUB_OFFLINE=1)" in result.stderr
    assert "Wan2.1_VAE.pth" in result.stderr and "diffusion_pytorch_model.safetensors" in result.stderr


def test_the_width_comes_from_the_weights_and_nothing_else_may_differ(official, tmp_path):
    # the fixture's checkpoint is 16 wide: it loaded through both routes above; another z_dim is still refused
    model = _diffusers_model(official[1])
    assert model.config.base_dim == 16
    model.save_pretrained(tmp_path / "vae")
    config = json.loads((tmp_path / "vae" / "config.json").read_text())
    (tmp_path / "vae" / "config.json").write_text(json.dumps({**config, "z_dim": 48}))
    with pytest.raises(CheckpointError, match=r"not the Wan2\.1 VAE architecture.*'z_dim': 48"):
        Wan21Tokenizer(str(tmp_path / "vae"))
