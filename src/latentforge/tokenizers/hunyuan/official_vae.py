"""The HunyuanVideo VAEs from their official checkpoints, loaded exactly into diffusers' classes.

A checkpoint is the official `vae/` folder (its config.json of the official module, beside the weight file), that
weight file, or any single file of the same tensors. The file is read without running code: a PyTorch pickle by
torch's weights-only reader, unwrapped as the official loader and diffusers' conversion script unwrap it
(`model`, `module`, `state_dict`), then, where keys start with `vae.`, only those, the prefix removed (the official
loader's rule). Each tokenizer renames the keys to diffusers' (`official_keys`), and the exact key check follows.

The config is the folder's own config.json (official or diffusers'), for a file the config.json beside it, or
tokenizer.vae_config; a lone file without any is refused rather than given a guessed architecture.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch

from ..checkpoints import CheckpointError, CheckpointSource, read_torch_file
from ..diffusers_vae import SINGLE_FILE
from ..single_file_vae import vae_config_folder
from .official_config import OFFICIAL_CONFIGS, diffusers_config
from .scaled_latent import ScaledLatentTokenizer

VAE_PREFIX = "vae."
WRAPPERS = ("model", "module", "state_dict")  # unwrapped in this order, as diffusers' conversion script does


class OfficialVaeTokenizer(ScaledLatentTokenizer):
    """A HunyuanVideo tokenizer that also reads the official release's VAE checkpoint."""

    official_class: ClassVar[str]  # the official module's class, as its config.json `_class_name` says
    official_weights: ClassVar[str]  # the weight file's name in the official vae/ folder

    @classmethod
    def official_keys(cls, state: dict[str, torch.Tensor],
                      path: Path) -> tuple[dict[str, torch.Tensor], Callable[[str], str]]:
        """The tensors of file `path` under diffusers' keys, and how to name a diffusers key as the file does."""
        return state, str

    @classmethod
    def resolve(cls, checkpoint: str, vae_config: str | None = None) -> CheckpointSource:
        path = Path(checkpoint).expanduser()
        if path.is_file():
            config = None if vae_config is None else vae_config_folder(vae_config, cls.model_class, path)
            return CheckpointSource(SINGLE_FILE, path, (path,), config)
        folder = cls._official_folder(path)
        if folder is None:  # a diffusers folder, or a hub id (downloaded), which may be of the official layout
            source = super().resolve(checkpoint, vae_config)
            folder = cls._official_folder(source.path)
            if folder is None:
                return source
        if vae_config is not None:
            raise CheckpointError(f"tokenizer.vae_config is set, but tokenizer checkpoint {folder} is the official "
                                  f"{cls.family} vae/ folder with its own config.json; unset tokenizer.vae_config")
        weights = folder / cls.official_weights
        if not weights.is_file():
            raise CheckpointError(f"{folder} holds the official {cls.family} config.json but no "
                                  f"{cls.official_weights}; download the official vae/ folder again")
        return CheckpointSource(SINGLE_FILE, weights, (weights,), folder)

    @classmethod
    def _official_folder(cls, path: Path) -> Path | None:
        """`path` or its vae/ where its config.json is of the official module, else None."""
        for folder in (path, path / "vae"):
            if _class_name(folder / "config.json") == cls.official_class:
                return folder
        return None

    @classmethod
    def read_config(cls, source: CheckpointSource) -> tuple[dict[str, Any], Path]:
        if source.kind != SINGLE_FILE:
            return super().read_config(source)
        folder = source.config or source.path.parent
        config_file = folder / "config.json"
        if not config_file.is_file():
            raise CheckpointError(
                f"tokenizer checkpoint {source.path} is a single file and its folder holds no config.json; set "
                f"tokenizer.vae_config to the official {cls.family} vae/ folder (its config.json) or to a diffusers "
                f"folder of {cls.model_class}"
            )
        found = _class_name(config_file)
        if found in OFFICIAL_CONFIGS:
            if found != cls.official_class:
                raise CheckpointError(f"{config_file} is the config of {found}, not of {cls.official_class} (the "
                                      f"official {cls.family} VAE); {cls.checkpoint_advice}")
            official = json.loads(config_file.read_text(encoding="utf-8"))
            return diffusers_config(official, config_file, cls.model_class), config_file
        return super().read_config(CheckpointSource(source.kind, source.path, source.weight_files, folder))

    @classmethod
    def read_state(cls, source: CheckpointSource) -> tuple[dict[str, torch.Tensor], Callable[[str], str]]:
        if source.kind != SINGLE_FILE:
            return super().read_state(source)
        return cls.official_keys(read_vae_tensors(source.path), source.path)


def read_vae_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The VAE's tensors of an official file (safetensors, or a PyTorch pickle read without running code)."""
    if path.name.endswith(".safetensors"):
        state = _read_safetensors(path)
    else:
        state = read_torch_file(path)
        for key in WRAPPERS:
            if isinstance(state, dict) and isinstance(state.get(key), dict):
                state = state[key]
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        found = type(state).__name__ if not isinstance(state, dict) else f"a dict of {len(state)} entries"
        raise CheckpointError(f"tokenizer checkpoint {path} does not hold a state dict of tensors (found {found}, "
                              "after unwrapping model/module/state_dict); pass the official VAE checkpoint")
    vae = {k.removeprefix(VAE_PREFIX): v for k, v in state.items() if k.startswith(VAE_PREFIX)}
    return vae or state


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except Exception as error:  # safetensors raises its own error type for a short or foreign file
        raise CheckpointError(f"cannot read {path} as a safetensors file ({str(error).strip() or type(error).__name__}"
                              "); the file is truncated or not a checkpoint: download it again and compare "
                              "`sha256sum` with the published SHA-256") from None


def _class_name(config_file: Path) -> str | None:
    if not config_file.is_file():
        return None
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot read {config_file} as JSON ({error})") from None
    return config.get("_class_name") if isinstance(config, dict) else None
