"""The official Wan CLIP (open-clip XLM-RoBERTa + ViT-H/14) from the `wan22==2.2.11` wheel, imported from its files.

The wheel ships it as `wan/modules/animate/clip.py` (Wan2.1's `wan/modules/clip.py`, the one Wan2.1 I2V loads
`models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth` with, moved beside Wan2.2 Animate); it imports
`wan/modules/attention.py` and `wan/modules/animate/xlm_roberta.py` (both extracted and imported as they are, torch
only), plus three things the visual path does not use or this machine lacks, replaced while clip.py is imported:
- `flash_attention` (CUDA only, computes in bf16/fp16): replaced in clip.py's namespace by the attention module's
  own fallback, `attention()` (scaled_dot_product_attention), called with the inputs' own dtype so an fp32
  comparison measures the architecture, not flash attention's half-precision rounding.
- `..tokenizers.HuggingfaceTokenizer` (the text tower's tokenizer; needs ftfy): a class that refuses to be used.
- `torchvision.transforms` (not installed here): `Compose`, `Resize`, `ToTensor` record their arguments (only the
  text-free visual path runs, which uses none of them), and `Normalize` computes what torchvision's
  `F.normalize` computes, `tensor.sub_(mean[:, None, None]).div_(std[:, None, None])`, with the mean and std the
  official `_clip` passes it. The stubs are in sys.modules only while clip.py is imported.

Wheel fetching and caching are wan_reference.py's (LATENTFORGE_TEST_REFS).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from unittest import mock

import torch

from helpers.wan_reference import WAN_WHEEL, _extract

CLIP_MEMBER = "wan/modules/animate/clip.py"
_MEMBERS = {"attention": "wan/modules/attention.py", "animate.xlm_roberta": "wan/modules/animate/xlm_roberta.py"}
_PACKAGE = "wan_clip_reference"
# The official clip_xlm_roberta_vit_h_14 at tiny widths (released: vision 1280 wide, 16 heads, 32 blocks, 224 px;
# text 1024 wide, 24 layers). Heads stay 80 wide, as released, since the official file does not record the count.
TINY_OFFICIAL = dict(embed_dim=16, image_size=28, patch_size=14, vision_dim=160, vision_heads=2, vision_layers=3,
                     vocab_size=64, max_text_len=16, text_dim=32, text_heads=2, text_layers=1)  # fmt: skip


def _module(name: str, path: Path | None = None) -> types.ModuleType:
    if path is None:
        module = types.ModuleType(name)
        module.__path__ = []
    else:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


class _RefusedTokenizer:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("the text tower's tokenizer is stubbed in the CLIP reference (visual path only)")


def _torchvision_stub() -> dict[str, types.ModuleType]:
    transforms = types.ModuleType("torchvision.transforms")

    class Recorded:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    class Compose:
        def __init__(self, transforms_list):
            self.transforms = transforms_list

    class Normalize:
        def __init__(self, mean, std):
            self.mean, self.std = mean, std

        def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
            mean = torch.as_tensor(self.mean, dtype=tensor.dtype, device=tensor.device)[:, None, None]
            std = torch.as_tensor(self.std, dtype=tensor.dtype, device=tensor.device)[:, None, None]
            return tensor.sub_(mean).div_(std)

    transforms.Compose, transforms.Normalize = Compose, Normalize
    transforms.Resize = transforms.ToTensor = Recorded
    transforms.InterpolationMode = types.SimpleNamespace(BICUBIC="bicubic")
    torchvision = types.ModuleType("torchvision")
    torchvision.transforms = transforms
    return {"torchvision": torchvision, "torchvision.transforms": transforms}


def official_clip_module() -> types.ModuleType:
    """The official clip.py (`XLMRobertaCLIP`, `clip_xlm_roberta_vit_h_14`, `CLIPModel`), with the stubs above."""
    name = f"{_PACKAGE}.modules.animate.clip"
    if name in sys.modules:
        return sys.modules[name]
    project, version, _ = WAN_WHEEL
    for package in (_PACKAGE, f"{_PACKAGE}.modules", f"{_PACKAGE}.modules.animate"):
        _module(package)
    attention = _module(f"{_PACKAGE}.modules.attention", _extract(project, version, _MEMBERS["attention"]))
    _module(f"{_PACKAGE}.modules.animate.xlm_roberta", _extract(project, version, _MEMBERS["animate.xlm_roberta"]))
    tokenizers = types.ModuleType(f"{_PACKAGE}.modules.tokenizers")
    tokenizers.HuggingfaceTokenizer = _RefusedTokenizer
    sys.modules[tokenizers.__name__] = tokenizers
    with mock.patch.dict(sys.modules, _torchvision_stub()):
        spec = importlib.util.spec_from_file_location(name, _extract(project, version, CLIP_MEMBER))
        clip = importlib.util.module_from_spec(spec)
        sys.modules[name] = clip
        spec.loader.exec_module(clip)
    sys.modules[name] = clip  # patch.dict restored sys.modules as it was before the import

    def flash_attention(q, k, v, dropout_p=0.0, causal=False, version=None, **_unused):
        return attention.attention(q, k, v, dropout_p=dropout_p, causal=causal, dtype=q.dtype)

    clip.flash_attention = flash_attention
    return clip


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """Every tensor random: norm scales in [0.5, 1.5) and biases near 0 (defaults of 1 and 0 would hide a swapped
    key), weights scaled by their fan-in so three blocks stay in range."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.copy_((torch.rand(param.shape, generator=generator) - 0.5) * 0.2)
            elif "norm" in name:
                param.copy_(torch.rand(param.shape, generator=generator) + 0.5)
            else:
                fan_in = param[0].numel() if param.ndim > 1 else 1
                param.copy_(torch.randn(param.shape, generator=generator) / fan_in**0.5)


def tiny_official_clip(folder: Path, seed: int, file_name: str = "clip_tiny.pth") -> tuple[object, Path]:
    """The official `CLIPModel` (its `visual()` preprocessing and ViT) around a tiny random `XLMRobertaCLIP` built by
    `clip_xlm_roberta_vit_h_14`, and the model's whole state dict saved with torch.save, the layout of the released
    .pth (`visual.*`, `textual.*`, `log_scale`).

    `CLIPModel.__init__` would build the full-size model and a tokenizer; the wrapper is made as it makes itself,
    with the tiny model and the transforms `_clip` returns."""
    clip = official_clip_module()
    model, transforms = clip.clip_xlm_roberta_vit_h_14(return_transforms=True, dtype=torch.float32, device="cpu",
                                                       **TINY_OFFICIAL)
    model = model.eval().requires_grad_(False)
    _randomise(model, seed)
    wrapper = object.__new__(clip.CLIPModel)
    wrapper.dtype, wrapper.device, wrapper.model, wrapper.transforms = torch.float32, "cpu", model, transforms
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name
    torch.save(model.state_dict(), path)
    return wrapper, path


def official_tokens(wrapper: object, frames: torch.Tensor) -> torch.Tensor:
    """uint8 [B, H, W, 3] -> the official penultimate tokens: each frame as wan/image2video.py hands it over
    (`TF.to_tensor(img).sub_(0.5).div_(0.5)`, [3, H, W] in [-1, 1]), as a one-frame video [3, 1, H, W] to
    `CLIPModel.visual`."""
    videos = [frame.permute(2, 0, 1).float().div(255).sub_(0.5).div_(0.5)[:, None] for frame in frames]
    with torch.no_grad():
        return wrapper.visual(videos)
