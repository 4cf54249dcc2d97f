"""The "wan2.1" tokenizer: the Wan2.1 VAE (diffusers' AutoencoderKLWan modules) in three precision modes.

- fp32: fp32 weights and input, TF32 off; equals the official `WanVAE_.encode(x, scale)` bit for bit on CPU.
- bf16: the fast path (fast_encoder.FastWanEncoder over the same weights): bf16 convolutions in channels-last
  3D, residual add + RMS norm + SiLU fused (Triton on CUDA) and rounded once, causal windows sized by
  max_gpu_mem_gib, cuDNN's heuristics choosing the kernels (reproducible) unless tokenizer.cudnn_benchmark asks
  for autotuning; mu is normalised in fp32 with the exact constants. Decode uses diffusers' modules in bf16.
- cosmos-bf16: what Cosmos-Predict2's `TokenizerInterface` computes: bf16 weights and input, no autocast,
  RMS norm in bf16, mean and 1/std as bf16 tensors, bf16 normalisation, result cast to fp32.
fp32 and cosmos-bf16 run the causal chunk loop of Cosmos' `VAE_.encode`: frame 0 alone, then a window of
frames at a time, the remainder last. fp32 always uses window 4, exactly the loop of official Wan and diffusers;
cosmos-bf16 uses `temporal_window` (16 in Cosmos' video2world). On CUDA, cuDNN is set to deterministic
algorithms chosen by its heuristics (mode B for the bf16 fast path), never by timing, so the same batch encodes
to the same bits in any process on the same GPU model and software (deep verify relies on it).
"""

from __future__ import annotations

from typing import Any

import diffusers
import torch
import torch.nn.functional as F
from diffusers.models.autoencoders.autoencoder_kl_wan import WanRMS_norm

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
from .wan21_checkpoint import LOCAL_FILE_ADVICE, load_model, resolve_checkpoint

# Wan's latent normalisation constants (formats.md §1; Wan2.1 vae.py, Cosmos tokenizer.py, diffusers).
LATENTS_MEAN = (-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
                0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921)  # fmt: skip
LATENTS_STD = (2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
               3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160)  # fmt: skip


class CosmosRMSNorm(WanRMS_norm):
    """Cosmos' (and official Wan's) RMS_norm: F.normalize in the input dtype, no fp32 upcast."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=(1 if self.channel_first else -1)) * self.scale * self.gamma + self.bias


def latent_constants(precision: str, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, 1/std) shaped [1,16,1,1,1], built by the same expressions as Wan's and Cosmos' `VAE.__init__`
    (`torch.tensor(list, dtype)` then `1.0 / std`), so the bf16 rounding of cosmos-bf16 is theirs."""
    dtype = torch.bfloat16 if precision == "cosmos-bf16" else torch.float32
    mean = torch.tensor(list(LATENTS_MEAN), dtype=dtype, device=device)
    std = torch.tensor(list(LATENTS_STD), dtype=dtype, device=device)
    return mean.view(1, -1, 1, 1, 1), (1.0 / std).view(1, -1, 1, 1, 1)


class Wan21Tokenizer(WanTokenizer):
    """Wan2.1 VAE: [B,3,T,H,W] in [-1,1] -> normalised posterior mean [B,16,1+(T-1)/4,H/8,W/8]."""

    name = "wan2.1"
    latent_family = "wan2.1"
    latent_channels = 16
    temporal_factor = 4
    spatial_factor = 8
    causal = True
    conditioning_latents = ("wan-i2v",)  # Wan2.1 I2V-14B and Wan2.2 I2V-A14B run this VAE
    precisions = {"fp32": 1e-5, "bf16": 2e-2, "cosmos-bf16": 2e-2}
    missing_checkpoint = (
        "tokenizer.checkpoint is required for wan2.1: give Wan2.1_VAE.pth, Cosmos-Predict2's "
        "tokenizer/tokenizer.pth, a diffusers folder or a hub id such as Wan-AI/Wan2.1-T2V-1.3B-Diffusers "
        "with --tokenizer-checkpoint"
    )
    checkpoint_advice = LOCAL_FILE_ADVICE
    load_model = staticmethod(load_model)

    @staticmethod
    def released_architecture() -> diffusers.AutoencoderKLWan:
        return diffusers.AutoencoderKLWan()  # diffusers' defaults are the Wan2.1 VAE

    def __init__(
        self,
        checkpoint: str,
        precision: str = "fp32",
        sha256: str | None = None,
        temporal_window: int = 4,
        device: torch.device | str = "cpu",
        max_gpu_mem_gib: float = 24.0,
        cudnn_benchmark: bool = False,
        conv_kernels: str = "plans",
        conv_plans_dir: str | None = None,
    ):
        super().__init__(device)
        if precision not in self.precisions:
            raise ConfigError(f"tokenizer.precision={precision!r} is not allowed; allowed: "
                              f"{', '.join(self.precisions)}")
        if isinstance(temporal_window, bool) or not isinstance(temporal_window, int) or temporal_window < 1:
            raise ConfigError(
                f"tokenizer.temporal_window={temporal_window!r} must be an integer >= 1 (4 as official Wan, "
                "16 as Cosmos-Predict2's video2world config)"
            )
        self.precision = precision
        self.temporal_window = OFFICIAL_WINDOW if precision == "fp32" else temporal_window
        # How kernels are chosen, as configured: cuDNN's heuristics (false) or timing (true, bf16 on CUDA only)
        self.cudnn_benchmark = precision == "bf16" and cudnn_benchmark
        self.conv_kernels = conv_kernels if precision == "bf16" else None
        planned = prepare_fast_path(device, conv_kernels) if precision == "bf16" else False
        self.source = resolve_checkpoint(checkpoint)
        self.checkpoint_sha256 = checkpoint_sha256(self.source)
        check_sha256(self.source, self.checkpoint_sha256, sha256)  # before any weights are read
        self._dtype = torch.float32 if precision == "fp32" else torch.bfloat16
        model = load_model(self.source, self._dtype)
        if precision == "cosmos-bf16":
            for module in model.modules():
                if type(module) is WanRMS_norm:
                    module.__class__ = CosmosRMSNorm
        self._vae = model.to(self.device)
        self._mean, self._inv_std = latent_constants(precision, self.device)
        self._fast = None
        if precision == "bf16":
            self._fast = fast_encoder(self._vae, self.device, max_gpu_mem_gib, cudnn_benchmark, planned,
                                      conv_plans_dir)
        deterministic_cudnn(self.device)

    @classmethod
    def from_config(cls, cfg: TokenizerConfig, device: torch.device | str) -> Wan21Tokenizer:
        cls.check_settings(cfg)
        options = wan_options(cfg)
        return cls(
            cfg.checkpoint, cfg.precision, cfg.sha256, options.temporal_window, device, options.max_gpu_mem_gib,
            options.cudnn_benchmark, options.conv_kernels, options.conv_plans_dir,
        )

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        if video.ndim != 5 or video.shape[1] != 3:
            raise ConfigError(f"wan2.1 encodes [B,3,T,H,W] video in [-1,1]; got a tensor of shape {list(video.shape)}")
        self.check_geometry(video.shape[2], video.shape[3], video.shape[4])
        with torch.inference_mode(), tf32_off():
            if self._fast is not None:
                mu = self._fast(video.to(self.device))
            else:
                mu = encode_mu(self._vae, video.to(self.device, self._dtype), self.temporal_window)
            latent = (mu - self._mean) * self._inv_std
        return latent.float()

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.ndim != 5 or latent.shape[1] != self.latent_channels:
            raise ConfigError(
                f"wan2.1 decodes [B,{self.latent_channels},T',H',W'] latents; got shape {list(latent.shape)}"
            )
        constants_dtype = self._mean.dtype
        with torch.inference_mode(), tf32_off():
            z = latent.to(self.device, constants_dtype)
            mu = (z / self._inv_std + self._mean).to(self._dtype)
            frames = self._vae.decode(mu).sample  # diffusers clamps to [-1,1] as official WanVAE.decode does
        return frames.float()

    def fingerprint(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checkpoint_sha256": self.checkpoint_sha256,
            "checkpoint_format": self.source.kind,
            "precision": self.precision,
            "temporal_window": self.temporal_window if self._fast is None else None,
            "max_gpu_mem_gib": self._fast.max_gib if self._fast is not None else None,
            "cudnn_benchmark": self.cudnn_benchmark,
            "conv_kernels": self.conv_kernels,
            "encoder_path": "latentforge fast (wan21_fast)" if self._fast is not None else "chunk loop",
            "latent": "posterior mean mu, (mu - latents_mean) * (1 / latents_std)",
            "latents_mean": list(LATENTS_MEAN),
            "latents_std": list(LATENTS_STD),
            "constants_dtype": "bfloat16" if self.precision == "cosmos-bf16" else "float32",
            "diffusers_version": diffusers.__version__,
        }
