"""clip-vit-h14: the CLIP ViT-H/14 image tokens Wan2.1 I2V cross-attends to (257 x 1280 per frame).

The tokens are the penultimate hidden states of transformers' CLIPVisionModel: diffusers'
`WanImageToVideoPipeline.encode_image` takes `hidden_states[-2]`, the official Wan code runs its ViT with
`use_31_block=True` (every block but the last). hidden_states[0] is the pre-normed embedding, so [-2] is the output
of block 31 of 32, the same tensor. Precisions:
- fp32: weights and compute in float32;
- bf16: weights cast to bfloat16 (round to nearest) and the forward under `torch.autocast(bfloat16)`, as the
  official `CLIPModel` runs (weights in its dtype, autocast around the ViT): matmuls in bf16, layer norms and
  softmax in float32. The preprocessing runs in float32 either way, and TF32 is off (fp32 stays fp32 on CUDA).
"""

from __future__ import annotations

from typing import Any

import torch

from ..devices import tf32_off
from ..errors import ConfigError
from .clip_checkpoint import ClipSource, check_sha256, checkpoint_sha256, load_model, resolve
from .clip_preprocess import OfficialPreprocess, ProcessorPreprocess
from .image_encoder import ImageEncoder

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class ClipVisionH14(ImageEncoder):
    name = "clip-vit-h14"
    # bf16: measured on tiny random towers at about 1e-2 relative L2 against fp32; a real re-encode compares like
    # with like (bf16 against bf16 on another device), which the same bound covers
    precisions = {"fp32": 1e-5, "bf16": 2e-2}

    def __init__(self, source: ClipSource, sha256: str, device: str, precision: str):
        if precision not in self.precisions:
            raise ConfigError(f"conditioning.precision {precision!r} is not allowed for {self.name}; allowed: "
                              f"{', '.join(self.precisions)}")
        self.source = source
        self.sha256 = sha256
        self.precision = precision
        self.device = torch.device(device)
        self.model = load_model(source).to(self.device, _DTYPES[precision])
        config = self.model.config
        grid = config.image_size // config.patch_size
        self.tokens = grid * grid + 1
        self.width = int(config.hidden_size)
        if source.kind == "wan-official":
            self.preprocess: ProcessorPreprocess | OfficialPreprocess = OfficialPreprocess(config.image_size)
        else:
            self.preprocess = ProcessorPreprocess(source.processor_folder, config.image_size)
        self.host_frames = self.preprocess.on_host

    @classmethod
    def preflight(cls, path: str, expected_sha256: str | None) -> None:
        """The route, the files and their SHA-256; a folder's config and processor settings are read too (the
        weights load in the ranks)."""
        source = resolve(path)
        check_sha256(source, expected_sha256)
        if source.kind == "diffusers-folder":
            import transformers

            try:
                transformers.CLIPVisionConfig.from_pretrained(source.path, local_files_only=True)
                if source.processor_folder is not None:
                    transformers.CLIPImageProcessor.from_pretrained(source.processor_folder, local_files_only=True)
            except (OSError, ValueError) as error:
                first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise ConfigError(f"cannot read the image encoder's config in {source.path} ({first}); give a "
                                  "diffusers Wan I2V pipeline folder or its image_encoder/ folder") from None

    @classmethod
    def checkpoint_digest(cls, path: str) -> str:
        return checkpoint_sha256(resolve(path))

    @classmethod
    def load(cls, path: str, device: str, precision: str, expected_sha256: str | None) -> ClipVisionH14:
        source = resolve(path)
        sha256 = check_sha256(source, expected_sha256)  # before any weights are read
        return cls(source, sha256, device, precision)

    @torch.inference_mode()
    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        if frames.dtype != torch.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"{self.name} encodes uint8 [B, H, W, 3] RGB frames, got {frames.dtype} "
                             f"{list(frames.shape)}")
        with tf32_off():  # cuDNN would run the fp32 patch embedding in TF32 (about 1e-3 from the CPU's)
            pixels = self.preprocess(frames, self.device)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"):
                states = self.model(pixel_values=pixels, output_hidden_states=True).hidden_states[-2]
        return states.float()

    def fingerprint(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checkpoint_sha256": self.sha256,
            "route": self.source.kind,
            "hidden_state": "penultimate",
            "preprocessing": self.preprocess.record(),
            "precision": self.precision,
            "tokens": self.tokens,
            "width": self.width,
        }
