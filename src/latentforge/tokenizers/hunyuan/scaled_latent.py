"""What the HunyuanVideo 1.0 and 1.5 tokenizers share: the latent is the posterior mean times the config's
`scaling_factor`, no shift, as diffusers' HunyuanVideo pipelines scale image latents (`* scaling_factor`) and
unscale before decoding (`/ scaling_factor`), and as musubi-tuner's trainers scale the cached latents."""

from __future__ import annotations

from typing import Any

import torch

from ..diffusers_vae import DiffusersVaeTokenizer


class ScaledLatentTokenizer(DiffusersVaeTokenizer):
    """z = mu * scaling_factor; decode(z) = decoder(z / scaling_factor), each in float32."""

    scaling_factor: float

    def read_constants(self, model: Any) -> None:
        self.scaling_factor = float(model.config.scaling_factor)

    def normalize(self, mu: torch.Tensor) -> torch.Tensor:
        return mu * self.scaling_factor

    def denormalize(self, latent: torch.Tensor) -> torch.Tensor:
        return latent / self.scaling_factor

    def normalization(self) -> dict[str, Any]:
        return {"latent": "posterior mean mu, mu * scaling_factor", "scaling_factor": self.scaling_factor}
