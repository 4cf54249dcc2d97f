"""Reconstruction quality of decoded latents against the frames that were encoded: PSNR and SSIM.

Both compare videos [3, T, H, W] (or [T, H, W, 3] with `channels_last`) in [-1, 1], so the peak-to-peak range
is 2. SSIM is the Wang et al. (2004) index exactly as `skimage.metrics.structural_similarity` computes it by
default (7x7 uniform window, K1=0.01, K2=0.03, sample covariance, mean over the window-valid region, mean
over channels), taken per frame and averaged over frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ConfigError

DATA_RANGE = 2.0  # pixels live in [-1, 1]
SSIM_WINDOW = 7
SSIM_K1, SSIM_K2 = 0.01, 0.03


def _as_float64(video: np.ndarray | torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(video).detach().cpu().double()


def psnr(reconstruction: np.ndarray | torch.Tensor, reference: np.ndarray | torch.Tensor) -> float:
    """10 log10(range^2 / MSE) over every element, in dB; inf for identical inputs."""
    a, b = _as_float64(reconstruction), _as_float64(reference)
    if a.shape != b.shape:
        raise ValueError(f"psnr needs equal shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
    mse = float(torch.mean((a - b) ** 2))
    return math.inf if mse == 0.0 else 10.0 * math.log10(DATA_RANGE**2 / mse)


def ssim(reconstruction: np.ndarray | torch.Tensor, reference: np.ndarray | torch.Tensor,
         channels_last: bool = False) -> float:
    """Mean SSIM over frames of two videos [3, T, H, W] (or [T, H, W, 3] with channels_last)."""
    a, b = _as_float64(reconstruction), _as_float64(reference)
    if a.shape != b.shape or a.dim() != 4:
        raise ValueError(f"ssim needs two equal 4-D videos, got {tuple(a.shape)} and {tuple(b.shape)}")
    if not channels_last:
        a, b = a.movedim(0, -1), b.movedim(0, -1)
    if min(a.shape[1], a.shape[2]) < SSIM_WINDOW:
        raise ValueError(f"ssim needs frames of at least {SSIM_WINDOW}x{SSIM_WINDOW} pixels, got {tuple(a.shape[1:3])}")
    # [T, H, W, C] -> [T*C, 1, H, W]: every frame and channel is one image
    x = a.permute(0, 3, 1, 2).reshape(-1, 1, a.shape[1], a.shape[2])
    y = b.permute(0, 3, 1, 2).reshape(-1, 1, b.shape[1], b.shape[2])

    def mean(image: torch.Tensor) -> torch.Tensor:
        # skimage filters with reflection and then drops a border of (win-1)/2; a valid-only window mean is
        # exactly the part it keeps
        return F.avg_pool2d(image, SSIM_WINDOW, stride=1)

    samples = SSIM_WINDOW * SSIM_WINDOW
    cov_norm = samples / (samples - 1)
    ux, uy = mean(x), mean(y)
    vx = cov_norm * (mean(x * x) - ux * ux)
    vy = cov_norm * (mean(y * y) - uy * uy)
    vxy = cov_norm * (mean(x * y) - ux * uy)
    c1, c2 = (SSIM_K1 * DATA_RANGE) ** 2, (SSIM_K2 * DATA_RANGE) ** 2
    index = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    per_image = index.mean(dim=(1, 2, 3)).view(a.shape[0], a.shape[3])
    return float(per_image.mean(dim=1).mean())


@dataclass(frozen=True)
class QualityThresholds:
    """Below `fail_*` a deep verify fails, below `warn_*` it warns. Defaults (docs/verify.md) catch a cache that
    decodes to something else than its source (wrong normalisation, wrong modality, wrong tokenizer), not a
    tokenizer that is merely lossy: Wan2.1 reaches about 30-35 dB on natural 480p video."""

    fail_psnr: float = 15.0
    warn_psnr: float = 25.0
    fail_ssim: float = 0.3
    warn_ssim: float = 0.6

    def __post_init__(self) -> None:
        if self.fail_psnr > self.warn_psnr or self.fail_ssim > self.warn_ssim:
            raise ConfigError(
                f"quality thresholds: fail must not exceed warn (psnr {self.fail_psnr} > {self.warn_psnr} or ssim "
                f"{self.fail_ssim} > {self.warn_ssim}); lower --fail-psnr/--fail-ssim or raise the warn levels"
            )


@dataclass(frozen=True)
class Quality:
    """Reconstruction quality of one modality of one sample."""

    dataset_index: int
    modality: str
    psnr_db: float
    ssim: float

    def verdict(self, thresholds: QualityThresholds) -> str:
        """"fail", "warn" or "ok"."""
        if self.psnr_db < thresholds.fail_psnr or self.ssim < thresholds.fail_ssim:
            return "fail"
        if self.psnr_db < thresholds.warn_psnr or self.ssim < thresholds.warn_ssim:
            return "warn"
        return "ok"


def measure(dataset_index: int, modality: str, decoded: torch.Tensor, source: torch.Tensor) -> Quality:
    """Quality of decoded [3,T,H,W] against source [3,T,H,W]; decoded pixels are clamped to [-1, 1] first,
    as a viewer would see them (Wan's decoder clamps already; haar-4x8x8 does not)."""
    decoded = decoded.detach().cpu().float().clamp(-1.0, 1.0)
    return Quality(dataset_index, modality, psnr(decoded, source), ssim(decoded, source))
