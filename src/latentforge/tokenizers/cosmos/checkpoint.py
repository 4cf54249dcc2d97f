"""Cosmos tokenizer checkpoints: where the weights come from, their SHA-256, and loading them into our modules.

Routes (docs/tokenizers.md "Cosmos"):
  (a) a released hub folder (Cosmos-Tokenizer-CV8x8x8, ...): `encoder.jit` + `decoder.jit`, or `autoencoder.jit`;
  (b) a single TorchScript file holding the whole autoencoder (`autoencoder.jit`);
  (c) CV only: a diffusers `AutoencoderKLCosmos` folder (`config.json` + weights, or a pipeline folder's `vae/`).
A TorchScript archive holds code as well as weights: only its tensors are read (`torch.jit.load(...).state_dict()`)
and copied into our modules; its graph never runs. The SHA-256 is checked before any of this.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import torch

from ..checkpoints import CheckpointError, CheckpointSource, check_keys, diffusers_folder, read_weight_files
from .architecture import CosmosArchitecture
from .diffusers_keys import architecture_from_config, diffusers_to_reference_key
from .layers import HybridDownsample, HybridUpsample
from .model import CosmosVideoAutoencoder

JIT_PARTS = ("decoder.jit", "encoder.jit")  # sorted: the order their SHA-256 listing takes
WHOLE_JIT = "autoencoder.jit"
ADVICE = (
    "pass a released tokenizer folder (e.g. `huggingface-cli download nvidia/Cosmos-Tokenizer-CV8x8x8 --local-dir "
    "DIR`: encoder.jit + decoder.jit, or autoencoder.jit), an autoencoder.jit file, or for a CV tokenizer a "
    "diffusers AutoencoderKLCosmos folder (config.json + diffusion_pytorch_model.safetensors)"
)
# Buffers the reference keeps out of its state dicts; an archive that still lists them loses nothing by dropping
_WEIGHTLESS = ("wavelets", "_arange", "patch_size_buffer", "_levels", "_basis", "implicit_codebook")


def resolve(checkpoint: str) -> CheckpointSource:
    """A file or folder -> CheckpointSource ("jit-file", "jit-folder" or "diffusers-folder"), reading no weights."""
    path = Path(checkpoint).expanduser()
    if path.is_file():
        if path.suffix != ".jit":
            raise CheckpointError(f"tokenizer checkpoint {path} is not a TorchScript .jit file; {ADVICE}")
        return CheckpointSource("jit-file", path, (path,))
    if path.is_dir():
        if (path / "config.json").is_file() or (path / "vae" / "config.json").is_file():
            return diffusers_folder(path, ADVICE)
        parts = tuple(path / name for name in JIT_PARTS)
        if all(p.is_file() for p in parts):
            return CheckpointSource("jit-folder", path, parts)
        if (path / WHOLE_JIT).is_file():
            return CheckpointSource("jit-file", path / WHOLE_JIT, (path / WHOLE_JIT,))
        raise CheckpointError(f"{path} holds neither encoder.jit + decoder.jit, autoencoder.jit nor a diffusers "
                              f"config.json; {ADVICE}")
    raise CheckpointError(f"tokenizer checkpoint {checkpoint!r} does not exist; {ADVICE}")


def read_jit_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a TorchScript archive, by their module names; its code is compiled by torch.jit.load but
    never called."""
    try:
        with warnings.catch_warnings():  # torch deprecates TorchScript, but the released weights ship in it
            warnings.filterwarnings("ignore", message=".*torch.jit.load.* is deprecated", category=DeprecationWarning)
            state = torch.jit.load(str(path), map_location="cpu").state_dict()
    except Exception as error:  # noqa: BLE001 - torch raises many types for foreign or corrupt files
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"cannot read {path} as a TorchScript archive ({first_line}); download it again and "
                              "compare `sha256sum` with the published SHA-256") from None
    return {k: v for k, v in state.items() if k.rsplit(".", 1)[-1] not in _WEIGHTLESS}


def _jit_state(source: CheckpointSource) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    for path in source.weight_files:
        for key, tensor in read_jit_weights(path).items():
            if key in state:
                names = ", ".join(p.name for p in source.weight_files)
                raise CheckpointError(f"{key!r} is in more than one of {names} in {source.path}; keep one set")
            state[key] = tensor
    return state


def _count(state: dict[str, torch.Tensor], pattern: str) -> list[int]:
    return sorted({int(m[1]) for key in state if (m := re.fullmatch(pattern, key))})


def architecture_from_state(state: dict[str, torch.Tensor], released: CosmosArchitecture) -> CosmosArchitecture:
    """`released` at the widths the encoder's tensors have (so a narrow test model loads through this code); the
    released architecture itself where they are absent, so the key check names what is missing."""
    first = state.get("encoder.conv_in.0.conv3d.weight")
    out = state.get("encoder.conv_out.1.conv3d.weight")
    levels = _count(state, r"encoder\.down\.(\d+)\.block\.0\.conv1\.0\.conv3d\.weight")
    blocks = _count(state, r"encoder\.down\.0\.block\.(\d+)\.norm1\.norm\.weight")
    if first is None or out is None or not levels or not blocks:
        return released
    channels = int(first.shape[0])
    mult = tuple(int(state[f"encoder.down.{i}.block.0.conv1.0.conv3d.weight"].shape[0]) // channels for i in levels)
    return released.narrowed(channels, mult, len(blocks), int(out.shape[0]))


def never_run_sampler_keys(model: CosmosVideoAutoencoder) -> set[str]:
    """Keys of the sampler convolutions the reference builds but never runs (a level that does not downsample in
    time has an unused temporal conv, ...): diffusers builds no module for them."""
    keys = set()
    for name, module in model.named_modules():
        if isinstance(module, (HybridDownsample, HybridUpsample)):
            down = isinstance(module, HybridDownsample)
            spatial_conv, temporal_conv = ("conv1", "conv2") if down else ("conv2", "conv1")
            unused = [spatial_conv] if not module.spatial else []
            unused += [temporal_conv] if not module.temporal else []
            unused += ["conv3"] if not (module.spatial or module.temporal) else []
            keys |= {f"{name}.{conv}.conv3d.{p}" for conv in unused for p in ("weight", "bias")}
    return keys


def _diffusers_state(source: CheckpointSource, released: CosmosArchitecture, family: str):
    from diffusers import AutoencoderKLCosmos

    if released.discrete:
        raise CheckpointError(f"{source.path} is a diffusers folder, but {family} is a discrete tokenizer: diffusers "
                              f"has no DV model; {ADVICE}")
    config = AutoencoderKLCosmos.load_config(source.path)
    expected = {"_class_name": "AutoencoderKLCosmos", "patch_type": "haar", "in_channels": 3, "out_channels": 3,
                "latent_channels": released.latent_channels, "patch_size": released.patch_size,
                "spatial_compression_ratio": released.spatial_compression,
                "temporal_compression_ratio": released.temporal_compression}  # fmt: skip
    wrong = {k: config.get(k) for k, v in expected.items() if config.get(k, v) != v}
    if wrong:
        raise CheckpointError(f"{source.path / 'config.json'} is not {family}: it has {wrong}, expected "
                              f"{ {k: expected[k] for k in wrong} }")
    arch = architecture_from_config(config)
    levels = len(arch.decoder_channels_mult)
    state = {diffusers_to_reference_key(k, levels): v for k, v in read_weight_files(source.weight_files).items()}
    return arch, state


def load_model(source: CheckpointSource, released: CosmosArchitecture, family: str,
               dtype: torch.dtype) -> CosmosVideoAutoencoder:
    """Our autoencoder holding exactly the checkpoint's tensors (every key, no other), cast to `dtype`, in eval
    mode. From diffusers, the never-run sampler convolutions (which it does not store) are zeros."""
    if source.kind == "diffusers-folder":
        arch, state = _diffusers_state(source, released, family)
    else:
        state = _jit_state(source)
        arch = architecture_from_state(state, released)
    with torch.device("meta"):
        model = CosmosVideoAutoencoder(arch)
    expected = model.state_dict()
    if source.kind == "diffusers-folder":
        for key in never_run_sampler_keys(model) - state.keys():
            state[key] = torch.zeros(expected[key].shape)
    check_keys(source, state, expected, str, family)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=True, assign=True)
    return model.eval().requires_grad_(False)
