"""What every tokenizer's checkpoint code shares: resolving a file, a diffusers folder or a hub id without reading
weights, the SHA-256 a fingerprint records (a folder of several files hashes as its `sha256sum` listing), the
`tokenizer.sha256` check, reading weights without running code, and the exact key check.

Each tokenizer adds what is its own: the official file's kind and key names, its architecture check, its model.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import torch

from ..errors import LatentforgeError
from ..hashing import remembered_sha256
from ..hub import HUB_ID

_FILE_SUFFIXES = (".pth", ".pt", ".ckpt", ".safetensors", ".bin")


class CheckpointError(LatentforgeError):
    """A tokenizer checkpoint is missing, of the wrong architecture, or has a different hash than required."""


@dataclass(frozen=True)
class CheckpointSource:
    """A resolved checkpoint: `kind` is "diffusers-folder", or the kind of a single official file the tokenizer
    names (e.g. "wan-state-dict"), recorded in its fingerprint as `checkpoint_format`. `config`: the folder of a
    single file's diffusers config.json, where the tokenizer takes one from elsewhere."""

    kind: str
    path: Path
    weight_files: tuple[Path, ...]
    config: Path | None = None


# ------------------------------------------------------------------------------------------ resolving


def resolve_checkpoint(checkpoint: str, advice: str, file_kind: str, subfolder: str = "vae") -> CheckpointSource:
    """A file (of `file_kind`), a folder or a hub id -> CheckpointSource, without reading any weights. `advice`
    names the local files to pass instead, in every refusal; `subfolder` is where a pipeline folder holds the
    model."""
    path = Path(checkpoint).expanduser()
    if path.is_file():
        return CheckpointSource(file_kind, path, (path,))
    if path.is_dir():
        return diffusers_folder(path, advice, subfolder)
    if HUB_ID.match(checkpoint) and not checkpoint.endswith(_FILE_SUFFIXES):
        return diffusers_folder(_download_hub(checkpoint, advice, subfolder), advice, subfolder)
    raise CheckpointError(f"tokenizer checkpoint {checkpoint!r} does not exist; {advice}")


def diffusers_folder(folder: Path, advice: str, subfolder: str = "vae") -> CheckpointSource:
    if not (folder / "config.json").is_file() and (folder / subfolder / "config.json").is_file():
        folder = folder / subfolder
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


def _download_hub(repo_id: str, advice: str, subfolder: str) -> Path:
    """The repo's VAE files in the hub cache; offline or unreachable -> CheckpointError naming local files."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    patterns = ["config.json", "diffusion_pytorch_model.safetensors"]
    try:
        folder = snapshot_download(repo_id, allow_patterns=patterns + [f"{subfolder}/{p}" for p in patterns])
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, HfHubHTTPError, OSError) as error:
        offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
        why = "the hub is offline (HF_HUB_OFFLINE=1)" if offline else "it could not be downloaded"
        raise CheckpointError(
            f"tokenizer checkpoint {repo_id!r} is a Hugging Face hub id, but {why} and it is not in the local "
            f"cache ({type(error).__name__}); {advice}"
        ) from None
    return Path(folder)


# ------------------------------------------------------------------------------------------ hashing



def checkpoint_sha256(source: CheckpointSource) -> str:
    """The file's SHA-256 (what `sha256sum` prints); for a folder of several weight files, the SHA-256 of
    their `sha256sum`-format listing (sorted by name), so a single-file folder hashes like its file."""
    if len(source.weight_files) == 1:
        return remembered_sha256(source.weight_files[0])
    listing = "".join(f"{remembered_sha256(p)}  {p.name}\n" for p in source.weight_files)
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def check_sha256(source: CheckpointSource, actual: str, expected: str | None, key: str = "tokenizer.sha256") -> None:
    """CheckpointError when `expected` (the config's `key`) is set and differs from `actual`."""
    if expected is not None and actual != expected.strip().lower():
        raise CheckpointError(
            f"tokenizer checkpoint {source.path} has SHA-256 {actual}, but {expected.strip().lower()} is "
            f"required ({key}); pass the checkpoint with that hash or change the required hash"
        )


# ------------------------------------------------------------------------------------------ reading


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    state = read_torch_file(path)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path} does not hold a state dict of tensors (got {type(state).__name__})")
    return state


def read_torch_file(path: Path) -> object:
    """What a PyTorch checkpoint holds, read by torch's weights-only unpickler: tensors, containers and plain
    values, never code the file names."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:  # torch's text advises weights_only=False, which would run the code
        if "Unsupported global" in str(error):  # the file names a function or class to call: code, not damage
            raise CheckpointError(f"{path} is not a plain state dict of tensors: loading it would run code it "
                                  "holds, which latentforge refuses; pass the official checkpoint file or a "
                                  "diffusers folder") from None
        _unreadable(path, error)
    except Exception as error:  # torch raises many types for foreign or corrupt files; all mean "unreadable"
        _unreadable(path, error)


def _unreadable(path: Path, error: Exception) -> NoReturn:
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    raise CheckpointError(f"cannot read {path} as a PyTorch checkpoint ({first_line}); the file is truncated or not "
                          "a checkpoint: download it again and compare `sha256sum` with the published "
                          "SHA-256") from None


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
    `shown_as`, as the file names them) when `state` is not exactly the `family` model's `expected` tensors."""
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
