"""The official single-file checkpoints of the VAEs run by diffusers' classes: the VAE's tensors read from the file
(from a whole-model file, only its `vae.*` tensors; no pickled code run), then renamed to diffusers' keys by the
conversion function diffusers' own `from_single_file` uses for the class (`SINGLE_FILE_LOADABLE_CLASSES`).

A single file holds no diffusers config.json, and diffusers would download one from the hub: here the config comes
from a local folder (`tokenizer.vae_config`). Classes diffusers has no conversion for are refused.
"""

from __future__ import annotations

from pathlib import Path

import diffusers
import torch
from diffusers.loaders.single_file_model import SINGLE_FILE_LOADABLE_CLASSES

from .checkpoints import CheckpointError, CheckpointSource, read_state_dict

VAE_PREFIX = "vae."  # the VAE's tensors in the official whole-model files (LTX-Video 0.9.x, LTX-2)


def single_file_source(source: CheckpointSource, model_class: str, name: str, vae_config: str | None,
                       advice: str) -> CheckpointSource:
    """The file `source` with the folder of its config.json; CheckpointError where diffusers cannot convert the
    class's official keys. Without `vae_config` the source still hashes, and loading it is refused."""
    if model_class not in SINGLE_FILE_LOADABLE_CLASSES:
        raise CheckpointError(
            f"tokenizer checkpoint {source.path} is a single file, and diffusers {diffusers.__version__} has no "
            f"conversion of {model_class}'s official keys (its from_single_file does not take this class), so "
            f"{name} reads a diffusers folder only: {advice}"
        )
    if vae_config is None:
        return source
    return CheckpointSource(source.kind, source.path, source.weight_files,
                            vae_config_folder(vae_config, model_class, source.path))


def vae_config_folder(vae_config: str, model_class: str, weights: Path) -> Path:
    """The folder of tokenizer.vae_config's config.json: the folder, a pipeline folder's vae/, or the file."""
    folder = Path(vae_config).expanduser()
    if folder.is_file() and folder.name == "config.json":
        folder = folder.parent
    if not (folder / "config.json").is_file() and (folder / "vae" / "config.json").is_file():
        folder = folder / "vae"
    if not (folder / "config.json").is_file():
        raise CheckpointError(
            f"tokenizer.vae_config={vae_config!r} is not a folder with config.json (nor a pipeline folder with "
            f"vae/config.json); pass the folder holding the {model_class} config.json of the same release as "
            f"{weights.name}"
        )
    return folder


def config_folder(source: CheckpointSource, model_class: str) -> Path:
    """Where the source's config.json is: its own folder, or for a single file the configured one."""
    if source.config is not None:
        return source.config
    if source.kind == "diffusers-folder":
        return source.path
    raise CheckpointError(
        f"tokenizer checkpoint {source.path} is a single file, which holds no diffusers config; set "
        f"tokenizer.vae_config to a folder with the {model_class} config.json of the same release (the vae/ folder "
        "of its diffusers version: config.json alone is enough)"
    )


def read_single_file_vae(source: CheckpointSource, model_class: str) -> dict[str, torch.Tensor]:
    """The file's VAE tensors under diffusers' keys, by diffusers' conversion function for `model_class`."""
    state = _vae_tensors(source.path)
    convert = SINGLE_FILE_LOADABLE_CLASSES[model_class]["checkpoint_mapping_fn"]
    try:
        return convert(checkpoint=state, config=None)
    except KeyError as error:  # the conversion reads keys it needs to tell versions apart
        raise CheckpointError(
            f"tokenizer checkpoint {source.path} is not an official {model_class} checkpoint: diffusers' conversion "
            f"needs the key {error.args[0]!r}, which the file does not hold"
        ) from None


def _vae_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The `vae.*` tensors of a whole-model file, or every tensor of a VAE-only file (prefixed `vae.`, as
    the conversion expects), reading no other tensor of a safetensors file."""
    if path.name.endswith(".safetensors"):
        from safetensors import safe_open

        with safe_open(path, "pt") as file:
            keys = list(file.keys())
            wanted = [k for k in keys if k.startswith(VAE_PREFIX)] or keys
            state = {k: file.get_tensor(k) for k in wanted}
    else:
        state = read_state_dict(path)
        state = {k: v for k, v in state.items() if k.startswith(VAE_PREFIX)} or state
    if not state:
        raise CheckpointError(f"tokenizer checkpoint {path} holds no tensors")
    return {k if k.startswith(VAE_PREFIX) else VAE_PREFIX + k: v for k, v in state.items()}
