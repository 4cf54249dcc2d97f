"""The CLIP image embedding of near-duplicate removal, on tiny random towers of the real architectures saved and
loaded through our loading code, against the references: transformers' CLIPVisionModelWithProjection.image_embeds
(a folder holding the projection), CLIPVisionModel.pooler_output (a folder without it), and for the official .pth
the official Wan ViT's class token after its final norm times its `head` (open-clip's pooling rule, which the Wan
file's `visual.head` is the projection of)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel, CLIPVisionModelWithProjection

from helpers.wan_clip_reference import official_tokens, tiny_official_clip
from latentforge.conditioning.clip_embedding import ClipImageEmbedder
from latentforge.errors import ConfigError

TINY = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=2, image_size=28,
            patch_size=14, projection_dim=16, hidden_act="gelu", layer_norm_eps=1e-5)  # fmt: skip


def _frames(seed: int, count: int = 3, size: tuple[int, int] = (30, 41)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (count, *size, 3), dtype=np.uint8)


def _unit(rows: torch.Tensor) -> np.ndarray:
    rows = rows.double().numpy()
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("model_class, output", [(CLIPVisionModelWithProjection, "image_embeds"),
                                                 (CLIPVisionModel, "pooler_output")])  # fmt: skip
def test_a_folder_embeds_as_transformers_does(tmp_path, model_class, output):
    torch.manual_seed(2)
    model = model_class(CLIPVisionConfig(**TINY)).eval()
    model.save_pretrained(tmp_path / "image_encoder")
    embedder = ClipImageEmbedder.load(str(tmp_path), "cpu", None)
    assert ClipImageEmbedder.identity(str(tmp_path))["embedding"] == output
    frames = _frames(1)
    processor = CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    with torch.no_grad():
        expected = _unit(getattr(model(**processor(images=list(frames), return_tensors="pt")), output))
    got = embedder.embed(list(frames))
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-6)

    # frames of other sizes in one call (windows of other aspect ratios): each embedded as it is alone
    others = list(_frames(3, count=2, size=(28, 60)))
    mixed = embedder.embed([frames[0], *others, frames[1]])
    np.testing.assert_allclose(mixed[[0, 3]], got[:2], atol=1e-6)
    np.testing.assert_allclose(mixed[1:3], embedder.embed(others), atol=1e-6)


# the official CLIPModel.visual wraps its ViT in torch.cuda.amp.autocast, deprecated and disabled without CUDA
@pytest.mark.filterwarnings("ignore:`torch.cuda.amp.autocast:FutureWarning")
@pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")
def test_the_official_file_embeds_through_its_head(tmp_path, monkeypatch):
    wrapper, path = tiny_official_clip(tmp_path, seed=4)
    visual = wrapper.model.visual
    tower = visual.forward

    def pooled(x, interpolation=False, use_31_block=False):  # every block, then the class token's norm and head
        return visual.post_norm(tower(x, interpolation)[:, 0]) @ visual.head

    monkeypatch.setattr(visual, "forward", pooled)
    frames = _frames(2)
    expected = _unit(official_tokens(wrapper, torch.from_numpy(frames)))
    assert ClipImageEmbedder.identity(str(path))["embedding"] == "image_embeds"
    np.testing.assert_allclose(ClipImageEmbedder.load(str(path), "cpu", None).embed(list(frames)), expected,
                               atol=1e-6)


def test_a_wrong_sha256_names_the_dedup_keys(tmp_path):
    CLIPVisionModel(CLIPVisionConfig(**TINY)).save_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="dedup.sha256 requires 0{64}.*set dedup.sha256"):
        ClipImageEmbedder.preflight(str(tmp_path), "0" * 64)
    with pytest.raises(ConfigError, match="dedup.model: image encoder checkpoint .* does not exist"):
        ClipImageEmbedder.preflight(str(tmp_path / "absent"), None)
