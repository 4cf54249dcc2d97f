"""Wan2.1 VAE checkpoints: where the weights come from, their SHA-256, and loading them into diffusers.

Resolving, hashing, reading and key checking are shared with the Wan2.2 VAE (wan22_checkpoint.py), which
passes its own advice and family name.

Routes (docs/tokenizers.md "wan2.1"):
  (a) the official `Wan2.1_VAE.pth` state dict (Wan's key names, mapped here to diffusers' names);
  (b) a diffusers folder (`config.json` + weights), or a pipeline folder holding one under `vae/`;
  (c) Cosmos-Predict2's `tokenizer/tokenizer.pth`: the same file as (a), so the same code path;
  and a Hugging Face hub id, downloaded into the hub cache and then loaded as (b).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ...errors import LatentforgeError
from ...hashing import sha256_file
from ...hub import HUB_ID

if TYPE_CHECKING:  # diffusers is imported where a model is made: the Cosmos tokenizers share these routes
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
_FILE_SUFFIXES = (".pth", ".pt", ".ckpt", ".safetensors", ".bin")
LOCAL_FILE_ADVICE = (
    "pass a local file instead: Wan2.1_VAE.pth (in the hub repo Wan-AI/Wan2.1-T2V-14B), Cosmos-Predict2's "
    "tokenizer/tokenizer.pth, or a diffusers folder with config.json and diffusion_pytorch_model.safetensors "
    "(the vae/ folder of Wan-AI/Wan2.1-T2V-1.3B-Diffusers)"
)


class CheckpointError(LatentforgeError):
    """A tokenizer checkpoint is missing, of the wrong architecture, or has a different hash than required."""


@dataclass(frozen=True)
class CheckpointSource:
    """A resolved checkpoint: `kind` is "wan-state-dict" (routes a, c) or "diffusers-folder" (route b)."""

    kind: str
    path: Path
    weight_files: tuple[Path, ...]


# ------------------------------------------------------------------------------------------ resolving


def resolve_checkpoint(checkpoint: str, advice: str = LOCAL_FILE_ADVICE) -> CheckpointSource:
    """A file, a folder or a hub id -> CheckpointSource, without reading any weights. `advice` names the local
    files to pass instead, in every refusal."""
    path = Path(checkpoint).expanduser()
    if path.is_file():
        return CheckpointSource("wan-state-dict", path, (path,))
    if path.is_dir():
        return _diffusers_folder(path, advice)
    if HUB_ID.match(checkpoint) and not checkpoint.endswith(_FILE_SUFFIXES):
        return _diffusers_folder(_download_hub(checkpoint, advice), advice)
    raise CheckpointError(f"tokenizer checkpoint {checkpoint!r} does not exist; {advice}")


def _diffusers_folder(folder: Path, advice: str) -> CheckpointSource:
    if not (folder / "config.json").is_file() and (folder / "vae" / "config.json").is_file():
        folder = folder / "vae"
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{folder} is a folder without config.json; {advice}")
    files = sorted(p for p in folder.iterdir() if p.is_file())
    # safetensors win when a folder holds both formats of the same weights
    weights = tuple(p for p in files if p.name.endswith(".safetensors")) or tuple(
        p for p in files if p.name.endswith(".bin")
    )
    if not weights:
        raise CheckpointError(f"{folder} holds config.json but no *.safetensors or *.bin weights")
    return CheckpointSource("diffusers-folder", folder, weights)


def _download_hub(repo_id: str, advice: str) -> Path:
    """The repo's VAE files in the hub cache; offline or unreachable -> CheckpointError naming local files."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    patterns = ["config.json", "diffusion_pytorch_model.safetensors"]
    try:
        folder = snapshot_download(repo_id, allow_patterns=patterns + [f"vae/{p}" for p in patterns])
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, HfHubHTTPError, OSError) as error:
        offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
        why = "the hub is offline (HF_HUB_OFFLINE=1)" if offline else "it could not be downloaded"
        raise CheckpointError(
            f"tokenizer checkpoint {repo_id!r} is a Hugging Face hub id, but {why} and it is not in the local "
            f"cache ({type(error).__name__}); {advice}"
        ) from None
    return Path(folder)


# ------------------------------------------------------------------------------------------ hashing

_DIGESTS: dict[tuple[str, int, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """Streamed SHA-256 of one file, remembered per (path, size, mtime, inode) so a process hashes it once."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if key not in _DIGESTS:
        _DIGESTS[key] = sha256_file(path)
    return _DIGESTS[key]


def checkpoint_sha256(source: CheckpointSource) -> str:
    """The file's SHA-256 (what `sha256sum` prints); for a folder of several weight files, the SHA-256 of
    their `sha256sum`-format listing (sorted by name), so a single-file folder hashes like its file."""
    if len(source.weight_files) == 1:
        return file_sha256(source.weight_files[0])
    listing = "".join(f"{file_sha256(p)}  {p.name}\n" for p in source.weight_files)
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def check_sha256(source: CheckpointSource, actual: str, expected: str | None) -> None:
    if expected is not None and actual != expected.strip().lower():
        raise CheckpointError(
            f"tokenizer checkpoint {source.path} has SHA-256 {actual}, but {expected.strip().lower()} is "
            "required (tokenizer.sha256); pass the checkpoint with that hash or change the required hash"
        )


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

    if source.kind == "wan-state-dict":
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


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's own text advises weights_only=False, which would run the file's code
        raise CheckpointError(f"{path} is not a plain state dict of tensors: loading it would run code it "
                              "holds, which latentforge refuses; pass the official Wan2.1_VAE.pth or a diffusers "
                              "folder") from None
    except Exception as error:  # torch raises many types for foreign or corrupt files; all mean "unreadable"
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"cannot read {path} as a PyTorch checkpoint ({first_line}); the file is truncated "
                              "or not a checkpoint: download it again and compare `sha256sum` with the published "
                              "SHA-256") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path} does not hold a state dict of tensors (got {type(state).__name__})")
    return state


def read_weight_files(files: tuple[Path, ...]) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    state: dict[str, torch.Tensor] = {}
    origin: dict[str, Path] = {}
    for path in files:
        part = load_file(path) if path.name.endswith(".safetensors") else read_state_dict(path)
        for key, tensor in part.items():
            if key in state:
                raise CheckpointError(
                    f"key {key!r} is in both {origin[key].name} and {path.name} in {path.parent}; keep one set "
                    "of weight files in the folder"
                )
            state[key], origin[key] = tensor, path
    return state


def check_keys(source: CheckpointSource, state: dict, expected: dict, shown_as, family: str) -> None:
    """CheckpointError listing unexpected keys, missing keys and tensors of the wrong shape (keys named by
    `shown_as`, as the file names them) when `state` is not exactly the `family` VAE's `expected` tensors."""
    unexpected = sorted(shown_as(k) for k in state if k not in expected)
    missing = sorted(shown_as(k) for k in expected if k not in state)
    mismatched = sorted(
        f"{shown_as(k)} {list(v.shape)} (expected {list(expected[k].shape)})"
        for k, v in state.items()
        if k in expected and v.shape != expected[k].shape
    )
    problems = [
        f"{len(items)} {label}: {', '.join(items[:20])}{' ...' if len(items) > 20 else ''}"
        for label, items in (("unexpected keys", unexpected), ("missing keys", missing),
                             ("tensors of the wrong shape", mismatched))  # fmt: skip
        if items
    ]
    if problems:
        raise CheckpointError(
            f"tokenizer checkpoint {source.path} is not a {family} VAE ({source.kind}): {'; '.join(problems)}"
        )
