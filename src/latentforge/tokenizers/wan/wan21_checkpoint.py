"""Wan2.1 VAE checkpoints: the official file's key names, the architecture check, and loading into diffusers.

Resolving, hashing, reading and key checking are every tokenizer's (tokenizers/checkpoints.py); the Wan2.2 VAE
(wan22_checkpoint.py) shares this key map's outer blocks and passes its own advice and family name.

Routes (docs/tokenizers.md "wan2.1"):
  (a) the official `Wan2.1_VAE.pth` state dict (Wan's key names, mapped here to diffusers' names);
  (b) a diffusers folder (`config.json` + weights), or a pipeline folder holding one under `vae/`;
  (c) Cosmos-Predict2's `tokenizer/tokenizer.pth`: the same file as (a), so the same code path;
  and a Hugging Face hub id, downloaded into the hub cache and then loaded as (b).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..checkpoints import CheckpointError, CheckpointSource, check_keys, read_state_dict, read_weight_files
from ..checkpoints import resolve_checkpoint as resolve_any

if TYPE_CHECKING:  # diffusers is imported where a model is made
    from diffusers import AutoencoderKLWan

# The Wan2.1 architecture (formats.md §7); a diffusers folder with another architecture is refused. The width
# (96 in the released file) is read from the weights, so the same architecture at any width loads: a test or a
# benchmark can run a narrow one through this code.
RELEASED_BASE_DIM = 96
WAN21_ARCHITECTURE = {
    "z_dim": 16,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
    "is_residual": False,
    "patch_size": None,
    "in_channels": 3,
    "out_channels": 3,
}
LOCAL_FILE_ADVICE = (
    "pass a local file instead: Wan2.1_VAE.pth (in the hub repo Wan-AI/Wan2.1-T2V-14B), Cosmos-Predict2's "
    "tokenizer/tokenizer.pth, or a diffusers folder with config.json and diffusion_pytorch_model.safetensors "
    "(the vae/ folder of Wan-AI/Wan2.1-T2V-1.3B-Diffusers)"
)
STATE_DICT = "wan-state-dict"  # the official file's kind (routes a and c), as fingerprints record it


def resolve_checkpoint(checkpoint: str, advice: str = LOCAL_FILE_ADVICE) -> CheckpointSource:
    """A Wan VAE's file (the official state dict), diffusers folder or hub id, reading no weights."""
    return resolve_any(checkpoint, advice, STATE_DICT)


# ------------------------------------------------------------------------------------------ key map


def outer_block_prefixes() -> list[tuple[str, str]]:
    """(Wan prefix, diffusers prefix) of the blocks Wan2.1 and Wan2.2 share around their stages: the quant convs,
    and each coder's first conv, middle blocks and head."""
    pairs = [("conv1.", "quant_conv."), ("conv2.", "post_quant_conv.")]
    for part in ("encoder", "decoder"):
        pairs += [
            (f"{part}.conv1.", f"{part}.conv_in."),
            (f"{part}.middle.0.", f"{part}.mid_block.resnets.0."),
            (f"{part}.middle.1.", f"{part}.mid_block.attentions.0."),
            (f"{part}.middle.2.", f"{part}.mid_block.resnets.1."),
            (f"{part}.head.0.", f"{part}.norm_out."),
            (f"{part}.head.2.", f"{part}.conv_out."),
        ]
    return pairs


def _block_prefixes() -> list[tuple[str, str]]:
    """(Wan prefix, diffusers prefix) per block; indices follow the Wan2.1 architecture (11 encoder
    downsample entries, 15 decoder upsample entries = 4 up blocks of 3 resnets + an upsampler)."""
    pairs = outer_block_prefixes()
    pairs += [(f"encoder.downsamples.{i}.", f"encoder.down_blocks.{i}.") for i in range(11)]
    for i in range(15):
        inner = f"resnets.{i % 4}." if i % 4 < 3 else "upsamplers.0."
        pairs.append((f"decoder.upsamples.{i}.", f"decoder.up_blocks.{i // 4}.{inner}"))
    return pairs


_BLOCKS = _block_prefixes()
# Inside residual blocks: Sequential indices of Wan's `residual` -> diffusers' named layers. No other block
# has keys starting with either side's names, so the renames need no block test in either direction.
RESIDUAL_LAYERS = [("residual.0.", "norm1."), ("residual.2.", "conv1."), ("residual.3.", "norm2."),
                   ("residual.6.", "conv2."), ("shortcut.", "conv_shortcut.")]  # fmt: skip


def rename_key(key: str, blocks: list[tuple[str, str]], layers: list[tuple[str, str]]) -> str:
    """`key` with its longest matching block prefix and then its layer name replaced (Wan <-> diffusers)."""
    matches = [(old, new) for old, new in blocks if key.startswith(old)]
    if not matches:
        return key
    old, new = max(matches, key=lambda pair: len(pair[0]))
    rest = key[len(old):]
    for layer_old, layer_new in layers:
        if rest.startswith(layer_old):
            rest = layer_new + rest[len(layer_old):]
            break
    return new + rest


def swap_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(new, old) for old, new in pairs]


def wan_to_diffusers_key(key: str) -> str:
    return rename_key(key, _BLOCKS, RESIDUAL_LAYERS)


def diffusers_to_wan_key(key: str) -> str:
    return rename_key(key, swap_pairs(_BLOCKS), swap_pairs(RESIDUAL_LAYERS))


# ------------------------------------------------------------------------------------------ loading


def load_model(source: CheckpointSource, dtype: torch.dtype) -> AutoencoderKLWan:
    """The diffusers model holding exactly the checkpoint's tensors (every key, no other) cast to `dtype`
    (round to nearest, as Cosmos' `model.to(dtype)`), in eval mode.

    Route (b) does not use `from_pretrained`: it initialises missing keys randomly with only a warning.
    """
    from diffusers import AutoencoderKLWan

    if source.kind == STATE_DICT:
        state = {wan_to_diffusers_key(k): v for k, v in read_state_dict(source.path).items()}
        with torch.device("meta"):  # diffusers' defaults are the Wan2.1 architecture
            model = AutoencoderKLWan(base_dim=_base_dim(state))
        shown_as = diffusers_to_wan_key  # errors name keys as they are in the file
    else:
        config = AutoencoderKLWan.load_config(source.path)
        wrong = {k: config.get(k) for k, v in WAN21_ARCHITECTURE.items() if config.get(k, v) != v}
        if wrong:
            raise CheckpointError(
                f"{source.path / 'config.json'} is not the Wan2.1 VAE architecture: it has {wrong}, expected "
                f"{ {k: WAN21_ARCHITECTURE[k] for k in wrong} }"
            )
        state = read_weight_files(source.weight_files)
        with torch.device("meta"):
            model = AutoencoderKLWan.from_config(config)
        shown_as = str
    check_keys(source, state, model.state_dict(), shown_as, "Wan2.1")
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True, assign=True)
    return model.eval().requires_grad_(False)


def _base_dim(state: dict[str, torch.Tensor]) -> int:
    """The width from the first convolution's shape ([base_dim, 3, 3, 3, 3]); the released width when that key is
    absent or odd, so the key check names what is wrong."""
    first = state.get("encoder.conv_in.weight")
    return int(first.shape[0]) if first is not None and first.ndim == 5 else RELEASED_BASE_DIM


