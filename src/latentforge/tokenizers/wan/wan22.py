"""The "wan2.2" tokenizer: the Wan2.2 VAE (Wan2.2 TI2V-5B's; diffusers' AutoencoderKLWan modules) in two modes.

- fp32: fp32 weights and input, TF32 off; equals the official `WanVAE_.encode(x, scale)` of `vae2_2.py` bit for
  bit on CPU (2x2 patchify, then frame 0 alone and 4 frames at a time, as the official loop). cuDNN picks
  deterministic kernels by its heuristics (mode A), as the official module does in its own process.
- bf16: 2x2 patchify, then the fast path (fast_encoder.FastWanEncoder over the same weights, as wan2.1's bf16):
  causal windows sized by max_gpu_mem_gib, channels-last 3D bf16 convolutions, residual adds + RMS norm + SiLU
  fused and rounded once, each convolution's kernel by a recorded cuDNN plan on CUDA (conv_kernels "plans") or
  by cuDNN's heuristics in mode B; mu is normalised in fp32 with the exact constants. Decode runs diffusers'
  modules in bf16.
Kernels are never chosen by timing unless tokenizer.cudnn_benchmark asks for it (bf16, heuristics), so the
same batch encodes to the same bits in any process on the same GPU model and software (deep verify relies on it).
"""

from __future__ import annotations

from typing import Any

import diffusers
import torch
from diffusers.models.autoencoders.autoencoder_kl_wan import patchify

from ...config import TokenizerConfig
from ...devices import tf32_off
from ...errors import ConfigError
from ..checkpoints import check_sha256, checkpoint_sha256
from .common import (
    OFFICIAL_WINDOW,
    WanTokenizer,
    deterministic_cudnn,
    encode_mu,
    fast_encoder,
    prepare_fast_path,
    wan_options,
)
from .wan21_checkpoint import resolve_checkpoint
from .wan22_checkpoint import (
    LATENTS_MEAN,
    LATENTS_STD,
    LOCAL_FILE_ADVICE,
    RELEASED_WIDTHS,
    diffusers_config,
    load_model,
)

PATCH = 2  # pixels per side folded into channels before the encoder (3 colours -> 12 channels)


class Wan22Tokenizer(WanTokenizer):
    """Wan2.2 VAE: [B,3,T,H,W] in [-1,1] -> normalised posterior mean [B,48,1+(T-1)/4,H/16,W/16]."""

    name = "wan2.2"
    latent_family = "wan2.2"
    latent_channels = 48
    temporal_factor = 4
    spatial_factor = 16
    causal = True
    conditioning_latents = ("first-frame",)  # Wan2.2 TI2V-5B conditions on the latent of frame 0
    precisions = {"fp32": 1e-5, "bf16": 2e-2}
    missing_checkpoint = (
        "tokenizer.checkpoint is required for wan2.2: give Wan2.2_VAE.pth (hub repo Wan-AI/Wan2.2-TI2V-5B), "
        "a diffusers folder or a hub id such as Wan-AI/Wan2.2-TI2V-5B-Diffusers with --tokenizer-checkpoint"
    )
    checkpoint_advice = LOCAL_FILE_ADVICE
    load_model = staticmethod(load_model)

    @staticmethod
    def released_architecture() -> diffusers.AutoencoderKLWan:
        return diffusers.AutoencoderKLWan.from_config(diffusers_config(**RELEASED_WIDTHS))

    @staticmethod
    def fast_input(video: torch.Tensor) -> torch.Tensor:
        return patchify(video, patch_size=PATCH)

    def __init__(self, checkpoint: str, precision: str = "fp32", sha256: str | None = None,
                 device: torch.device | str = "cpu", max_gpu_mem_gib: float = 24.0, cudnn_benchmark: bool = False,
                 conv_kernels: str = "plans", conv_plans_dir: str | None = None):
        super().__init__(device)
        if precision not in self.precisions:
            raise ConfigError(f"tokenizer.precision={precision!r} is not allowed for wan2.2; allowed: "
                              f"{', '.join(self.precisions)}")
        self.precision = precision
        # How the bf16 fast path's kernels are chosen, as configured (fp32 runs diffusers' modules: mode A)
        self.cudnn_benchmark = precision == "bf16" and cudnn_benchmark
        self.conv_kernels = conv_kernels if precision == "bf16" else None
        planned = prepare_fast_path(device, conv_kernels) if precision == "bf16" else False
        self.source = resolve_checkpoint(checkpoint, LOCAL_FILE_ADVICE)
        self.checkpoint_sha256 = checkpoint_sha256(self.source)
        check_sha256(self.source, self.checkpoint_sha256, sha256)  # before any weights are read
        self._dtype = torch.float32 if precision == "fp32" else torch.bfloat16
        self._vae = load_model(self.source, self._dtype).to(self.device)
        self._fast = None
        if precision == "bf16":
            self._fast = fast_encoder(self._vae, self.device, max_gpu_mem_gib, cudnn_benchmark, planned,
                                      conv_plans_dir)
        self._mean = torch.tensor(list(LATENTS_MEAN), dtype=torch.float32, device=self.device).view(1, -1, 1, 1, 1)
        self._inv_std = (1.0 / torch.tensor(list(LATENTS_STD), dtype=torch.float32, device=self.device)
                         ).view(1, -1, 1, 1, 1)  # fmt: skip
        deterministic_cudnn(self.device)

    @classmethod
    def from_config(cls, cfg: TokenizerConfig, device: torch.device | str) -> Wan22Tokenizer:
        cls.check_settings(cfg)
        options = wan_options(cfg)
        return cls(cfg.checkpoint, cfg.precision, cfg.sha256, device, options.max_gpu_mem_gib,
                   options.cudnn_benchmark, options.conv_kernels, options.conv_plans_dir)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        if video.ndim != 5 or video.shape[1] != 3:
            raise ConfigError(f"wan2.2 encodes [B,3,T,H,W] video in [-1,1]; got a tensor of shape {list(video.shape)}")
        self.check_geometry(video.shape[2], video.shape[3], video.shape[4])
        with torch.inference_mode(), tf32_off():
            patches = patchify(video.to(self.device, self._dtype), patch_size=PATCH)
            if self._fast is not None:
                mu = self._fast(patches)
            else:
                mu = encode_mu(self._vae, patches, OFFICIAL_WINDOW)
            latent = (mu.float() - self._mean) * self._inv_std
        return latent

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.ndim != 5 or latent.shape[1] != self.latent_channels:
            raise ConfigError(
                f"wan2.2 decodes [B,{self.latent_channels},T',H',W'] latents; got shape {list(latent.shape)}"
            )
        with torch.inference_mode(), tf32_off():
            mu = (latent.to(self.device, torch.float32) / self._inv_std + self._mean).to(self._dtype)
            # diffusers unpatchifies and clamps to [-1,1], as the official Wan2_2_VAE.decode does
            frames = self._vae.decode(mu).sample
        return frames.float()

    def fingerprint(self) -> dict[str, Any]:
        fingerprint = {
            "name": self.name,
            "checkpoint_sha256": self.checkpoint_sha256,
            "checkpoint_format": self.source.kind,
            "precision": self.precision,
            "latent_channels": self.latent_channels,
            "temporal_factor": self.temporal_factor,
            "spatial_factor": self.spatial_factor,
            "patch_size": PATCH,
            "temporal_window": OFFICIAL_WINDOW,
            "cudnn_benchmark": False,
            "encoder_path": "chunk loop",
            "latent": "posterior mean mu, (mu - latents_mean) * (1 / latents_std)",
            "latents_mean": list(LATENTS_MEAN),
            "latents_std": list(LATENTS_STD),
            "constants_dtype": "float32",
            "diffusers_version": diffusers.__version__,
        }
        if self._fast is not None:  # the fast path's execution settings (fp32 keeps the keys it always had)
            fingerprint.update({"temporal_window": None, "max_gpu_mem_gib": self._fast.max_gib,
                                "cudnn_benchmark": self.cudnn_benchmark, "conv_kernels": self.conv_kernels,
                                "encoder_path": "latentforge fast (wan21_fast)"})
        return fingerprint
