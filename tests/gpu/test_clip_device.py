"""clip-vit-h14 on CUDA agrees with its CPU run, which tests/conditioning/ checks equal to diffusers' encode_image
and the official Wan ViT: fp32 within 1e-5 (relative L2, the re-encode tolerance; TF32 is off), bf16 within 2e-2
of CPU fp32. The official preprocessing (bicubic interpolate on the device) agrees with CPU's too."""

from __future__ import annotations

import torch
from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

from latentforge.conditioning.clip_preprocess import OfficialPreprocess
from latentforge.conditioning.clip_vision import ClipVisionH14

TINY = dict(hidden_size=64, intermediate_size=256, num_attention_heads=2, num_hidden_layers=3, image_size=56,
            patch_size=14, hidden_act="gelu")  # fmt: skip


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.cpu() - b.cpu()).norm() / b.cpu().norm()).item()


def test_cuda_tokens_agree_with_cpu(tmp_path):
    torch.manual_seed(0)
    CLIPVisionModel(CLIPVisionConfig(**TINY)).save_pretrained(tmp_path / "image_encoder")
    CLIPImageProcessor(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56}).save_pretrained(
        tmp_path / "image_processor"
    )
    frames = torch.randint(0, 256, (3, 45, 70, 3), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)
    reference = ClipVisionH14.load(str(tmp_path), "cpu", "fp32", None).encode(frames)
    for precision in ("fp32", "bf16"):
        encoder = ClipVisionH14.load(str(tmp_path), "cuda", precision, None)
        tokens = encoder.encode(frames.cuda())
        assert tokens.device.type == "cuda" and tokens.dtype == torch.float32 and tokens.shape == (3, 17, 64)
        assert _relative(tokens, reference) <= ClipVisionH14.precisions[precision], precision


def test_official_preprocessing_on_cuda_agrees_with_cpu():
    frames = torch.randint(0, 256, (2, 61, 90, 3), generator=torch.Generator().manual_seed(2), dtype=torch.uint8)
    preprocess = OfficialPreprocess(224)
    on_cpu = preprocess(frames, torch.device("cpu"))
    on_cuda = preprocess(frames.cuda(), torch.device("cuda"))
    assert on_cuda.shape == on_cpu.shape == (2, 3, 224, 224)
    assert (on_cuda.cpu() - on_cpu).abs().max().item() <= 1e-5
