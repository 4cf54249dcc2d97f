"""The hyper-parameters of a Cosmos video tokenizer, in the names of the reference `cosmos_tokenizer` configs, and
the six released variants (CV/DV x 4x8x8, 8x8x8, 8x16x16)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

# Finite-scalar-quantisation levels of every released DV tokenizer: 8*8*8*5*5*5 = 64,000 tokens, 6 code channels
DV_LEVELS = (8, 8, 8, 5, 5, 5)


@dataclass(frozen=True)
class CosmosArchitecture:
    """One factorized causal video tokenizer: Haar patching, residual levels, hybrid down/up sampling, and for a
    discrete tokenizer FSQ levels (`levels`) on `latent_channels` code channels."""

    channels: int = 128
    channels_mult: tuple[int, ...] = (2, 4, 4)
    # the continuous 4x tokenizer builds its decoder with two levels only (reference: channels_mult [2, 4])
    decoder_channels_mult: tuple[int, ...] = (2, 4, 4)
    num_res_blocks: int = 2
    # attention inside a level when its resolution (`resolution` / patch / 2**level) is listed; at the released
    # resolution 1024 no level reaches 32, so only the middle blocks attend
    attn_resolutions: tuple[int, ...] = (32,)
    resolution: int = 1024
    patch_size: int = 4
    z_channels: int = 16
    latent_channels: int = 16  # CV: the latent; DV: the FSQ code dimension (embedding_dim, = len(levels))
    spatial_compression: int = 8
    temporal_compression: int = 8
    levels: tuple[int, ...] | None = None  # DV only

    @property
    def discrete(self) -> bool:
        return self.levels is not None

    @property
    def spatial_downs(self) -> int:
        """Levels that halve height and width after the patcher's own factor."""
        return int(math.log2(self.spatial_compression)) - int(math.log2(self.patch_size))

    @property
    def temporal_downs(self) -> int:
        return int(math.log2(self.temporal_compression)) - int(math.log2(self.patch_size))

    def narrowed(self, channels: int, channels_mult: tuple[int, ...], num_res_blocks: int,
                 z_channels: int) -> CosmosArchitecture:
        """The same architecture at other widths (what a checkpoint's tensor shapes say); the decoder keeps
        two levels where the released one has two."""
        decoder = channels_mult[: len(self.decoder_channels_mult)]
        return replace(self, channels=channels, channels_mult=channels_mult, decoder_channels_mult=decoder,
                       num_res_blocks=num_res_blocks, z_channels=z_channels)


def released(kind: str, temporal: int, spatial: int) -> CosmosArchitecture:
    """The architecture of Cosmos-Tokenizer-{kind}{temporal}x{spatial}x{spatial} (kind "CV" or "DV")."""
    continuous = kind == "CV"
    return CosmosArchitecture(
        decoder_channels_mult=(2, 4) if continuous and temporal == 4 else (2, 4, 4),
        latent_channels=16 if continuous else len(DV_LEVELS),
        spatial_compression=spatial,
        temporal_compression=temporal,
        levels=None if continuous else DV_LEVELS,
    )
