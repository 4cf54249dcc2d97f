"""clip-vit-h14 against the two references it must equal, on tiny random towers of the real architecture saved and
loaded through our loading code: diffusers' own WanImageToVideoPipeline.encode_image (route a, a pipeline folder)
and the official Wan CLIPModel.visual with use_31_block (route b, the official .pth layout)."""

from __future__ import annotations

import shutil
import types

import numpy as np
import PIL.Image
import pytest
import torch
from diffusers import WanImageToVideoPipeline
from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

from helpers.wan_clip_reference import official_tokens, tiny_official_clip
from latentforge import registry
from latentforge.conditioning.clip_vision import ClipVisionH14

# frame sizes: wide, tall and square, none a multiple of the patch, so resize and crop both matter
SIZES = [(37, 51), (64, 30), (29, 29)]
# the tiny tower: the released architecture (exact GELU, pre-norm, eps 1e-5, patch 14) at width 32, 3 blocks and
# 28 px (4 patches + the class token = 5 tokens)
TINY_HF = dict(hidden_size=32, intermediate_size=128, num_attention_heads=2, num_hidden_layers=3, image_size=28,
               patch_size=14, hidden_act="gelu", layer_norm_eps=1e-5, projection_dim=16)  # fmt: skip


def _frames(size: tuple[int, int], seed: int, count: int = 2) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (count, *size, 3), generator=generator, dtype=torch.uint8)


@pytest.fixture(scope="module")
def pipeline_folder(tmp_path_factory):
    """A diffusers pipeline folder as Wan-AI/Wan2.1-I2V-14B-480P-Diffusers lays it out: image_encoder/ (config.json,
    model.safetensors) and image_processor/ (preprocessor_config.json)."""
    folder = tmp_path_factory.mktemp("wan_i2v_diffusers")
    torch.manual_seed(0)
    model = CLIPVisionModel(CLIPVisionConfig(**TINY_HF))
    with torch.no_grad():  # norm scales and biases off their defaults, so a swapped key changes the tokens
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                param.add_(torch.randn_like(param) * 0.1)
    model.save_pretrained(folder / "image_encoder")
    CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}).save_pretrained(
        folder / "image_processor"
    )
    return folder


def _diffusers_encode_image(folder, images: list[PIL.Image.Image]) -> torch.Tensor:
    """diffusers' own WanImageToVideoPipeline.encode_image, on an object holding only the two components it reads,
    each loaded as the pipeline loads it (its class's from_pretrained on the subfolder)."""
    holder = types.SimpleNamespace(
        image_processor=CLIPImageProcessor.from_pretrained(folder / "image_processor"),
        image_encoder=CLIPVisionModel.from_pretrained(folder / "image_encoder").eval(),
    )
    with torch.no_grad():
        return WanImageToVideoPipeline.encode_image(holder, images, device=torch.device("cpu"))


def test_the_registry_names_the_encoder():
    assert registry.resolve("image_encoder", "clip-vit-h14") is ClipVisionH14


def test_pipeline_folder_tokens_equal_diffusers_encode_image_exactly(pipeline_folder):
    encoder = ClipVisionH14.load(str(pipeline_folder), "cpu", "fp32", None)
    assert (encoder.tokens, encoder.width) == (5, 32)
    for seed, size in enumerate(SIZES):
        frames = _frames(size, seed)
        expected = _diffusers_encode_image(pipeline_folder, [PIL.Image.fromarray(f) for f in frames.numpy()])
        tokens = encoder.encode(frames)
        assert tokens.dtype == torch.float32 and tokens.shape == (2, 5, 32)
        # the same library calls on the same weights and pixels: bit-equal
        assert torch.equal(tokens, expected), f"{size}: max |diff| {(tokens - expected).abs().max().item()}"


def test_image_encoder_folder_uses_its_sibling_processor_else_the_defaults_at_the_model_size(pipeline_folder, tmp_path):
    """image_encoder/ given directly still finds the pipeline's image_processor/ beside it. Copied away alone, it
    gets CLIPImageProcessor's defaults at the model's size: the settings the tiny pipeline saved, so the same
    tokens; the fingerprint says where they came from."""
    shutil.copytree(pipeline_folder / "image_encoder", tmp_path / "image_encoder")
    full = ClipVisionH14.load(str(pipeline_folder), "cpu", "fp32", None)
    inside = ClipVisionH14.load(str(pipeline_folder / "image_encoder"), "cpu", "fp32", None)
    alone = ClipVisionH14.load(str(tmp_path / "image_encoder"), "cpu", "fp32", None)
    frames = _frames(SIZES[0], seed=7)
    assert torch.equal(alone.encode(frames), full.encode(frames))
    assert inside.fingerprint() == full.fingerprint()
    assert full.fingerprint()["preprocessing"]["source"] == "image_processor folder"
    assert alone.fingerprint()["preprocessing"]["source"] == "CLIPImageProcessor defaults"
    assert alone.fingerprint()["preprocessing"]["settings"] == full.fingerprint()["preprocessing"]["settings"]


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    return tiny_official_clip(tmp_path_factory.mktemp("wan_official_clip"), seed=3)


# the official CLIPModel.visual wraps its ViT in torch.cuda.amp.autocast, deprecated and disabled without CUDA
@pytest.mark.filterwarnings("ignore:`torch.cuda.amp.autocast:FutureWarning")
@pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")
def test_official_pth_tokens_equal_the_official_visual_tower(official):
    wrapper, path = official
    encoder = ClipVisionH14.load(str(path), "cpu", "fp32", None)
    assert (encoder.tokens, encoder.width) == (5, 160)
    for seed, size in enumerate(SIZES):
        frames = _frames(size, seed + 10)
        expected = official_tokens(wrapper, frames)
        tokens = encoder.encode(frames)
        # Measured bit-equal on CPU (torch 2.13): the same float32 ops in the same order, q/k/v split from the
        # fused projection by rows. Allowed 1e-5 of the largest token value for another BLAS's blocking.
        scale = expected.abs().max().item()
        assert (tokens - expected).abs().max().item() <= 1e-5 * scale, size


def test_bf16_stays_close_to_fp32_and_is_fingerprinted(official):
    _, path = official
    fp32 = ClipVisionH14.load(str(path), "cpu", "fp32", None)
    bf16 = ClipVisionH14.load(str(path), "cpu", "bf16", None)
    frames = _frames(SIZES[1], seed=21)
    reference, tokens = fp32.encode(frames), bf16.encode(frames)
    assert tokens.dtype == torch.float32
    relative = ((tokens - reference).norm() / reference.norm()).item()
    assert 0 < relative <= ClipVisionH14.precisions["bf16"], relative
    assert fp32.fingerprint()["precision"] == "fp32" and bf16.fingerprint()["precision"] == "bf16"
    assert fp32.fingerprint() != bf16.fingerprint()


def test_the_two_routes_preprocess_differently_and_say_so(pipeline_folder, official):
    """The pipeline crops the long side (short side to 224, centre crop); the official code squeezes the whole
    frame. Fed the same wide frame both routes give different pixels, and their fingerprints name which ran."""
    folder_route = ClipVisionH14.load(str(pipeline_folder), "cpu", "fp32", None)
    official_route = ClipVisionH14.load(str(official[1]), "cpu", "fp32", None)
    frames = _frames((28, 56), seed=5)
    cropped = folder_route.preprocess(frames, torch.device("cpu"))
    squeezed = official_route.preprocess(frames, torch.device("cpu"))
    assert cropped.shape == squeezed.shape == (2, 3, 28, 28)
    assert not np.allclose(cropped.numpy(), squeezed.numpy(), atol=0.1)
    assert folder_route.fingerprint()["preprocessing"]["name"] == "clip-image-processor"
    assert official_route.fingerprint()["preprocessing"]["name"] == "wan-official"
