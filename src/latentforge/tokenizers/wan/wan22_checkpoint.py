"""Wan2.2 VAE checkpoints: its key map and architecture, loaded into diffusers' AutoencoderKLWan.

Routes (docs/tokenizers.md "wan2.2"): (a) the official `Wan2.2_VAE.pth` state dict (Wan's key names, mapped
here to diffusers' names); (b) a diffusers folder in the Wan2.2 configuration (or a pipeline folder holding one
under `vae/`); and a Hugging Face hub id, taken from the hub cache and loaded as (b). Resolving, hashing and
the strict reading are wan21_checkpoint's.
"""

from __future__ import annotations

import torch
from diffusers import AutoencoderKLWan

from ..checkpoints import CheckpointError, CheckpointSource, check_keys, read_state_dict, read_weight_files
from .wan21_checkpoint import RESIDUAL_LAYERS, STATE_DICT, outer_block_prefixes, rename_key, swap_pairs

# Wan2.2's per-channel latent statistics (formats.md §3; vae2_2.py `Wan2_2_VAE.__init__`, diffusers' Wan2.2 config)
LATENTS_MEAN = (-0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557,
                -0.1382, 0.0542, 0.2813, 0.0891, 0.1570, -0.0098, 0.0375, -0.1825,
                -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
                -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.1230,
                -0.0313, -0.1649, 0.0117, 0.0723, -0.2839, -0.2083, -0.0520, 0.3748,
                0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667)  # fmt: skip
LATENTS_STD = (0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013,
               0.8158, 1.0344, 0.5894, 1.0901, 0.6885, 0.6165, 0.8454, 0.4978,
               0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
               0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093,
               0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042, 0.5458, 1.6887,
               0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744)  # fmt: skip

# The Wan2.2 architecture in diffusers' config names; a folder with another one is refused. The widths (160 for
# the encoder, 256 for the decoder in the released file) are read from the weights, so every width loads.
WAN22_ARCHITECTURE = {
    "z_dim": 48,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
    "is_residual": True,
    "patch_size": 2,
    "in_channels": 12,
    "out_channels": 12,
}
RELEASED_WIDTHS = {"base_dim": 160, "decoder_base_dim": 256}
LOCAL_FILE_ADVICE = (
    "pass a local file instead: Wan2.2_VAE.pth (in the hub repo Wan-AI/Wan2.2-TI2V-5B) or a diffusers folder with "
    "config.json and diffusion_pytorch_model.safetensors (the vae/ folder of Wan-AI/Wan2.2-TI2V-5B-Diffusers)"
)
_STAGES = len(WAN22_ARCHITECTURE["dim_mult"])
_RES_BLOCKS = WAN22_ARCHITECTURE["num_res_blocks"]


def _block_prefixes() -> list[tuple[str, str]]:
    """(Wan prefix, diffusers prefix) per block. Each of the 4 encoder stages holds 2 residual blocks, then (but
    the last) a downsample; each decoder stage 3 residual blocks, then (but the last) an upsample. Their
    parameter-free shortcuts (AvgDown3D, DupUp3D) hold no keys."""
    pairs = outer_block_prefixes()
    for stage in range(_STAGES):
        down, up = f"encoder.downsamples.{stage}.downsamples.", f"decoder.upsamples.{stage}.upsamples."
        pairs += [(f"{down}{j}.", f"encoder.down_blocks.{stage}.resnets.{j}.") for j in range(_RES_BLOCKS)]
        pairs += [(f"{up}{j}.", f"decoder.up_blocks.{stage}.resnets.{j}.") for j in range(_RES_BLOCKS + 1)]
        if stage < _STAGES - 1:
            pairs.append((f"{down}{_RES_BLOCKS}.", f"encoder.down_blocks.{stage}.downsampler."))
            pairs.append((f"{up}{_RES_BLOCKS + 1}.", f"decoder.up_blocks.{stage}.upsampler."))
    return pairs


_BLOCKS = _block_prefixes()


def wan_to_diffusers_key(key: str) -> str:
    return rename_key(key, _BLOCKS, RESIDUAL_LAYERS)


def diffusers_to_wan_key(key: str) -> str:
    return rename_key(key, swap_pairs(_BLOCKS), swap_pairs(RESIDUAL_LAYERS))


def diffusers_config(base_dim: int, decoder_base_dim: int) -> dict:
    """The AutoencoderKLWan config of the Wan2.2 VAE with these widths."""
    return {**WAN22_ARCHITECTURE, "base_dim": base_dim, "decoder_base_dim": decoder_base_dim,
            "latents_mean": list(LATENTS_MEAN), "latents_std": list(LATENTS_STD),
            "scale_factor_temporal": 4, "scale_factor_spatial": 16}


def _widths(state: dict[str, torch.Tensor]) -> dict[str, int]:
    """Encoder and decoder widths from the first convolutions' shapes ([base, 12, 3,3,3] and [4*dec, 48, 3,3,3]);
    the released widths when a key is absent, so the key check names what is missing."""
    encoder, decoder = state.get("encoder.conv_in.weight"), state.get("decoder.conv_in.weight")
    return {
        "base_dim": int(encoder.shape[0]) if encoder is not None and encoder.ndim == 5 else RELEASED_WIDTHS["base_dim"],
        "decoder_base_dim": (int(decoder.shape[0]) // WAN22_ARCHITECTURE["dim_mult"][-1]
                             if decoder is not None and decoder.ndim == 5 else RELEASED_WIDTHS["decoder_base_dim"]),
    }


def load_model(source: CheckpointSource, dtype: torch.dtype) -> AutoencoderKLWan:
    """The diffusers model holding exactly the checkpoint's tensors (every key, no other) cast to `dtype`, in
    eval mode. Like the Wan2.1 loader it does not use `from_pretrained`, which fills missing keys randomly."""
    if source.kind == STATE_DICT:
        state = {wan_to_diffusers_key(k): v for k, v in read_state_dict(source.path).items()}
        _refuse_wan21_file(source, state)
        config = diffusers_config(**_widths(state))
        shown_as = diffusers_to_wan_key  # errors name keys as they are in the file
    else:
        config = AutoencoderKLWan.load_config(source.path)
        wrong = {k: config.get(k) for k, v in WAN22_ARCHITECTURE.items() if config.get(k) != v}
        if wrong:
            raise CheckpointError(
                f"{source.path / 'config.json'} is not the Wan2.2 VAE architecture: it has {wrong}, expected "
                f"{ {k: WAN22_ARCHITECTURE[k] for k in wrong} }; a Wan2.1 VAE folder needs tokenizer.name wan2.1"
            )
        state = read_weight_files(source.weight_files)
        shown_as = str
    with torch.device("meta"):
        model = AutoencoderKLWan.from_config(config)
    check_keys(source, state, model.state_dict(), shown_as, "Wan2.2")
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True, assign=True)
    return model.eval().requires_grad_(False)


def _refuse_wan21_file(source: CheckpointSource, state: dict[str, torch.Tensor]) -> None:
    """The Wan2.1 VAE takes RGB (3 input channels) where Wan2.2 takes 2x2 patches (12): say which tokenizer fits."""
    first = state.get("encoder.conv_in.weight")
    if first is not None and first.ndim == 5 and first.shape[1] == 3:
        raise CheckpointError(
            f"tokenizer checkpoint {source.path} is a Wan2.1 VAE (its first convolution takes 3 channels; Wan2.2's "
            "takes 12 patchified ones): use tokenizer.name wan2.1 for it, or pass Wan2.2_VAE.pth"
        )
