"""What every Cosmos video tokenizer backend shares: precisions, checkpoint resolving and pinning, loading,
geometry checks and the fingerprint. continuous.py (CV) and discrete.py (DV) add their latent."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import torch

from ...config import TokenizerConfig
from ...devices import tf32_off
from ...errors import ConfigError
from ..base import Tokenizer
from ..checkpoints import CheckpointError, CheckpointSource, check_sha256, checkpoint_sha256
from ..wan.common import deterministic_cudnn
from .architecture import CosmosArchitecture, released
from .checkpoint import ADVICE, load_model, resolve
from .model import CosmosVideoAutoencoder

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# a released folder's or file's name: Cosmos-Tokenizer-CV8x8x8, Cosmos-1.0-Tokenizer-DV8x16x16, ...
VARIANT_IN_NAME = re.compile(r"(?<![A-Za-z])(CV|DV)(\d+)x(\d+)x(\d+)(?!\d)", re.IGNORECASE)


def check_device(precision: str, device: torch.device | str) -> None:
    """bf16 runs on CUDA only: PyTorch has no bf16 CPU kernel for the samplers' 3D average pooling."""
    if precision == "bf16" and torch.device(device).type == "cpu":
        raise ConfigError("tokenizer.precision=bf16 needs a CUDA device for the Cosmos tokenizers (PyTorch's CPU "
                          "avg_pool3d has no bf16 kernel); use --device cuda, or --precision fp32 on the CPU")


def check_variant_name(source: CheckpointSource, name: str) -> None:
    """Refuse a checkpoint whose path names another released variant: CV8x8x8 and CV8x16x16 (and the DV pairs)
    have tensors of the same shapes, so the weights alone cannot tell them apart."""
    wanted = name.removeprefix("cosmos-").lower()
    for part in reversed(source.path.resolve().parts):
        match = VARIANT_IN_NAME.search(part)
        if match:
            found = f"{match[1].upper()}{match[2]}x{match[3]}x{match[4]}"
            if found.lower() != wanted:
                raise CheckpointError(f"tokenizer checkpoint {source.path} names the {found} tokenizer, but "
                                      f"tokenizer.name is {name}; choose --tokenizer cosmos-{found.lower()}")
            return


class CosmosTokenizer(Tokenizer):
    """A Cosmos-Tokenizer video model in fp32 (TF32 off) or bf16 (weights, input and every layer in bf16, as the
    reference's `CausalVideoTokenizer` runs by default)."""

    family: ClassVar[str]  # "CV" or "DV"
    causal = True
    latent_description: ClassVar[str]  # what encode returns, for the fingerprint

    def __init__(self, checkpoint: str, precision: str = "fp32", sha256: str | None = None,
                 device: torch.device | str = "cpu"):
        super().__init__(device)
        if precision not in self.precisions:
            raise ConfigError(f"tokenizer.precision={precision!r} is not allowed for {self.name}; allowed: "
                              f"{', '.join(self.precisions)}")
        check_device(precision, device)
        self.precision = precision
        self._dtype = DTYPES[precision]
        self.source = resolve(checkpoint)
        check_variant_name(self.source, self.name)
        self.checkpoint_sha256 = checkpoint_sha256(self.source)
        check_sha256(self.source, self.checkpoint_sha256, sha256)  # before any weights are read
        self._model = load_model(self.source, self.released_architecture(), self.name, self._dtype).to(self.device)
        deterministic_cudnn(self.device)

    @classmethod
    def released_architecture(cls) -> CosmosArchitecture:
        return released(cls.family, cls.temporal_factor, cls.spatial_factor)

    @classmethod
    def from_config(cls, cfg: TokenizerConfig, device: torch.device | str) -> CosmosTokenizer:
        cls.check_settings(cfg)
        return cls(cfg.checkpoint, cfg.precision, cfg.sha256, device)

    @classmethod
    def check_settings(cls, cfg: TokenizerConfig) -> None:
        super().check_settings(cfg)
        if not cfg.checkpoint:
            raise ConfigError(f"tokenizer.checkpoint is required for {cls.name}; {ADVICE}")

    @classmethod
    def preflight(cls, cfg: TokenizerConfig, device: str = "cpu") -> None:
        check_device(cfg.precision, device)
        source = resolve(cfg.checkpoint)
        check_variant_name(source, cls.name)
        check_sha256(source, checkpoint_sha256(source), cfg.sha256)
        load_model(source, cls.released_architecture(), cls.name, torch.float32)  # every key and shape; freed

    @classmethod
    def checkpoint_digest(cls, checkpoint: str | None) -> str | None:
        return None if not checkpoint else checkpoint_sha256(resolve(checkpoint))

    @property
    def model(self) -> CosmosVideoAutoencoder:
        return self._model

    def _check_video(self, video: torch.Tensor) -> None:
        if video.ndim != 5 or video.shape[1] != 3:
            raise ConfigError(f"{self.name} encodes [B,3,T,H,W] video in [-1,1]; got shape {list(video.shape)}")
        self.check_geometry(video.shape[2], video.shape[3], video.shape[4])

    def _encode_raw(self, video: torch.Tensor) -> torch.Tensor:
        """The quant_conv output in the model's dtype."""
        self._check_video(video)
        with torch.inference_mode(), tf32_off():
            return self._model.encode(video.to(self.device, self._dtype))

    def _decode_raw(self, latent: torch.Tensor) -> torch.Tensor:
        """Pixels clamped to [-1, 1] (as the reference clamps before its uint8 conversion), float32."""
        with torch.inference_mode(), tf32_off():
            return self._model.decode(latent.to(self.device, self._dtype)).float().clamp_(-1, 1)

    def fingerprint(self) -> dict[str, Any]:
        arch = self._model.arch
        return {
            "name": self.name,
            "version": 1,
            "checkpoint_sha256": self.checkpoint_sha256,
            "checkpoint_format": self.source.kind,
            "precision": self.precision,
            "latent": self.latent_description,
            "temporal_factor": self.temporal_factor,
            "spatial_factor": self.spatial_factor,
            "latent_channels": self.latent_channels,
            "fsq_levels": list(arch.levels) if arch.levels else None,
            **({"output": self.output, "vocabulary": self.vocabulary} if self.output == "tokens" else {}),
            "architecture": {"channels": arch.channels, "channels_mult": list(arch.channels_mult),
                             "decoder_channels_mult": list(arch.decoder_channels_mult),
                             "num_res_blocks": arch.num_res_blocks, "z_channels": arch.z_channels,
                             "patch_size": arch.patch_size, "patch_method": "haar"},
        }
