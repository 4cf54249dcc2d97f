"""clip-vit-h14 on CUDA agrees with its CPU run, which tests/conditioning/ checks equal to diffusers' encode_image
and the official Wan ViT: fp32 within 1e-5 (relative L2, the re-encode tolerance; TF32 is off), bf16 within 2e-2
of CPU fp32. The official preprocessing (bicubic interpolate on the device) agrees with CPU's too. A build's
conditioning stage hands the image processor frame 0 on the host without a wait for the device's whole queue."""

from __future__ import annotations

import pytest
import torch
from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

from latentforge.conditioning.clip_preprocess import OfficialPreprocess
from latentforge.conditioning.clip_vision import ClipVisionH14
from latentforge.config import BuildConfig
from latentforge.pipeline.conditioning import ConditioningStage, frame0_uint8
from latentforge.tokenizers.base import PIXEL_TABLE

TINY = dict(hidden_size=64, intermediate_size=256, num_attention_heads=2, num_hidden_layers=3, image_size=56,
            patch_size=14, hidden_act="gelu")  # fmt: skip


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.cpu() - b.cpu()).norm() / b.cpu().norm()).item()


def _save_tiny_clip(folder) -> None:
    torch.manual_seed(0)
    CLIPVisionModel(CLIPVisionConfig(**TINY)).save_pretrained(folder / "image_encoder")
    CLIPImageProcessor(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56}).save_pretrained(
        folder / "image_processor"
    )


def test_cuda_tokens_agree_with_cpu(tmp_path):
    _save_tiny_clip(tmp_path)
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


def test_build_stage_hands_the_processor_frame0_without_draining_the_queue(tmp_path):
    """Under torch's sync debug mode "error", a stream-wide wait (`.cpu()` of a device tensor, a copy from pageable
    memory) raises. The stage's encode of a batch (the clip's own encode queued through it) raises nothing, and its
    tokens equal the encoder's on frame 0 taken to the host the plain way."""
    _save_tiny_clip(tmp_path)
    config = BuildConfig()
    config.conditioning.image_embeds = "clip-vit-h14"
    encoder = ClipVisionH14.load(str(tmp_path), "cuda", "fp32", None)
    assert encoder.host_frames  # CLIPImageProcessor runs on host arrays
    stage = ConditioningStage(config, None, encoder)
    values = torch.randint(0, 256, (2, 3, 5, 45, 70), generator=torch.Generator().manual_seed(4))
    video = PIXEL_TABLE[values].cuda()
    stage.encode(video, torch.tanh)  # warm: the first call loads kernels and allocates
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="synchroniz"):  # the mode catches what the stage used to do
            video[:, :, 0].cpu()
        clip, streams = stage.encode(video, torch.tanh)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(clip, torch.tanh(video))
    expected = encoder.encode(frame0_uint8(video).cpu())
    assert torch.equal(streams["clip_image_embeds"], expected)
