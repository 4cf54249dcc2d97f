"""Where the CLIP ViT-H/14 image encoder's weights come from, their SHA-256, and loading them into transformers'
`CLIPVisionModel`.

Routes (docs/image-encoder.md):
  (a) a diffusers Wan I2V pipeline folder (`image_encoder/` with config.json and safetensors, `image_processor/`
      beside it), or its `image_encoder/` folder itself;
  (b) the official Wan `models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth`: the whole open-clip XLM-RoBERTa
      + ViT-H state dict, of which the visual tower (`visual.*`) is kept and renamed to transformers' names.
Weights are read without running code: safetensors, or `torch.load(weights_only=True)`.
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..errors import ConfigError
from ..hashing import remembered_sha256

if TYPE_CHECKING:
    from transformers import CLIPVisionConfig, CLIPVisionModel, CLIPVisionModelWithProjection

OFFICIAL_FILE = "models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth"
# The released files' SHA-256, from the Hugging Face LFS pointer of the file (the "Git LFS Details" of
# huggingface.co/Wan-AI/Wan2.1-I2V-14B-720P/blob/1457bb80f939672e3fff40a64d24a33196feca87/<file>, 4.77 GB). A file
# with this name and no image_encoder_sha256 is held to it. The diffusers image_encoder/model.safetensors has no
# digest we could establish from a public record, so a folder is pinned only by image_encoder_sha256.
RELEASED_SHA256 = {OFFICIAL_FILE: "628c9998b613391f193eb67ff68da9667d75f492911e4eb3decf23460a158c38"}
ADVICE = (
    "give a diffusers Wan I2V pipeline folder (e.g. "
    "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers, holding image_encoder/ and image_processor/), its image_encoder/ "
    f"folder, or the official {OFFICIAL_FILE} (in Wan-AI/Wan2.1-I2V-14B-480P)"
)
# The released ViT-H heads are 80 wide (1280 / 16); the official file does not record the head count, so it is
# hidden / 80 for a file of any width.
OFFICIAL_HEAD_WIDTH = 80
# Keys of the official file that do not reach the penultimate hidden states: the text tower, the logit scale and
# the visual projection to the 1024-wide joint embedding (CLIPVisionModel has no projection; the image embedding
# near-duplicate removal compares uses it, load_model(embedding=True)).
_OFFICIAL_UNUSED = ("textual.", "log_scale", "visual.head")
OFFICIAL_PROJECTION = "visual.head"  # [width, embed_dim], applied as pooled @ head (open-clip's `proj`)
PROJECTION = "visual_projection.weight"  # transformers' Linear(width, embed_dim, bias=False): the head transposed
PATH_KEY, SHA256_KEY = "conditioning.image_encoder_path", "conditioning.image_encoder_sha256"


@dataclass(frozen=True)
class ClipSource:
    """A resolved checkpoint: `kind` "diffusers-folder" (route a) or "wan-official" (route b). `processor_folder`
    is the pipeline's image_processor/ folder when there is one."""

    kind: str
    path: Path
    weight_files: tuple[Path, ...]
    processor_folder: Path | None


def resolve(path: str, key: str = PATH_KEY) -> ClipSource:
    """The checkpoint the setting `key` names -> ClipSource, reading no weights; ConfigError naming what is
    missing."""
    given = Path(path).expanduser()
    if given.is_file():
        if given.suffix not in (".pth", ".pt"):
            raise ConfigError(f"{key}: image encoder checkpoint {given} is a file but not a .pth state dict; {ADVICE}")
        return ClipSource("wan-official", given, (given,), None)
    if not given.is_dir():
        raise ConfigError(f"{key}: image encoder checkpoint {given} does not exist; {ADVICE}")
    folder = given / "image_encoder" if (given / "image_encoder" / "config.json").is_file() else given
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{key}: {given} holds neither config.json nor image_encoder/config.json; {ADVICE}")
    weights = tuple(sorted(folder.glob("*.safetensors"))) or tuple(sorted(folder.glob("pytorch_model*.bin")))
    if not weights:
        raise ConfigError(f"{key}: {folder} holds config.json but no *.safetensors or pytorch_model*.bin weights; "
                          f"{ADVICE}")
    # a pipeline's image_encoder/ has the pipeline's image_processor/ beside it; any other folder stands alone
    processor = folder.parent / "image_processor"
    has_processor = folder.name == "image_encoder" and (processor / "preprocessor_config.json").is_file()
    return ClipSource("diffusers-folder", folder, weights, processor if has_processor else None)


# ------------------------------------------------------------------------------------------ hashing

def checkpoint_sha256(source: ClipSource) -> str:
    """The file's SHA-256 (what `sha256sum` prints); for several weight files, the SHA-256 of their `sha256sum`
    listing sorted by name."""
    if len(source.weight_files) == 1:
        return remembered_sha256(source.weight_files[0])
    listing = "".join(f"{remembered_sha256(p)}  {p.name}\n" for p in source.weight_files)
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def check_sha256(source: ClipSource, expected: str | None, key: str = SHA256_KEY) -> str:
    """The checkpoint's SHA-256, checked against `expected` (the setting `key`), else against the released digest
    of a file carrying a released name. ConfigError naming the file, both values and the fix."""
    actual = checkpoint_sha256(source)
    if expected is not None:
        wanted, why = expected.strip().lower(), f"{key} requires"
    else:
        wanted, why = RELEASED_SHA256.get(source.path.name), "the released file of that name has"
    if wanted is not None and actual != wanted:
        raise ConfigError(
            f"image encoder checkpoint {source.path} has SHA-256 {actual}, but {why} {wanted}; download the file "
            f"again (a cut-short download differs), or set {key} to the digest of the checkpoint you mean to use"
        )
    return actual


# ------------------------------------------------------------------------------------------ key map


def official_to_transformers(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The official visual tower in transformers' checkpoint names (`vision_model.*`). The official attention
    keeps q, k and v in one Linear (`to_qkv`, rows q then k then v, as its `view(b, s, 3, n, d)` reads them)."""
    mapped: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        if key.startswith(_OFFICIAL_UNUSED):
            continue
        if not key.startswith("visual."):
            raise ConfigError(f"key {key!r} is neither the visual nor the text tower of the official CLIP file; "
                              f"{ADVICE}")
        mapped.update(_rename_visual(key.removeprefix("visual."), tensor))
    return mapped


def _rename_visual(key: str, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
    top = {"patch_embedding.weight": "embeddings.patch_embedding.weight",
           "pre_norm.weight": "pre_layrnorm.weight", "pre_norm.bias": "pre_layrnorm.bias",
           "post_norm.weight": "post_layernorm.weight", "post_norm.bias": "post_layernorm.bias"}  # fmt: skip
    if key in top:
        return {f"vision_model.{top[key]}": tensor}
    if key == "cls_embedding":  # [1, 1, D] -> [D]
        return {"vision_model.embeddings.class_embedding": tensor.reshape(-1)}
    if key == "pos_embedding":  # [1, N + 1, D] -> [N + 1, D]
        return {"vision_model.embeddings.position_embedding.weight": tensor.reshape(tensor.shape[-2:])}
    parts = key.split(".")
    if parts[0] != "transformer" or len(parts) < 4:
        raise ConfigError(f"key 'visual.{key}' of the official CLIP file is not part of its ViT; {ADVICE}")
    layer, rest = f"vision_model.encoder.layers.{parts[1]}.", ".".join(parts[2:])
    if rest.startswith("attn.to_qkv."):
        kind = parts[-1]
        return {f"{layer}self_attn.{p}_proj.{kind}": t.clone() for p, t in zip("qkv", tensor.chunk(3, dim=0))}
    inner = {"norm1.": "layer_norm1.", "norm2.": "layer_norm2.", "attn.proj.": "self_attn.out_proj.",
             "mlp.0.": "mlp.fc1.", "mlp.2.": "mlp.fc2."}  # fmt: skip
    for old, new in inner.items():
        if rest.startswith(old):
            return {layer + new + rest.removeprefix(old): tensor}
    raise ConfigError(f"key 'visual.{key}' of the official CLIP file is not part of its ViT; {ADVICE}")


def official_config(state: dict[str, torch.Tensor]) -> CLIPVisionConfig:
    """The CLIPVisionConfig of the official tower, from its tensors' shapes: exact GELU, pre-norm, eps 1e-5 (the
    official `clip_xlm_roberta_vit_h_14`'s settings)."""
    from transformers import CLIPVisionConfig

    patch = state.get("vision_model.embeddings.patch_embedding.weight")
    positions = state.get("vision_model.embeddings.position_embedding.weight")
    fc1 = state.get("vision_model.encoder.layers.0.mlp.fc1.weight")
    if patch is None or positions is None or fc1 is None:
        raise ConfigError(f"the official CLIP file lacks its visual tower (visual.patch_embedding, "
                          f"visual.pos_embedding, visual.transformer.0); {ADVICE}")
    hidden, grid = int(patch.shape[0]), round((positions.shape[0] - 1) ** 0.5)
    layers = len({k.split(".")[3] for k in state if k.startswith("vision_model.encoder.layers.")})
    return CLIPVisionConfig(
        hidden_size=hidden, intermediate_size=int(fc1.shape[0]), num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // OFFICIAL_HEAD_WIDTH), patch_size=int(patch.shape[-1]),
        image_size=grid * int(patch.shape[-1]), hidden_act="gelu", layer_norm_eps=1e-5, projection_dim=hidden,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ loading


def read_official(path: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's own text advises weights_only=False, which would run the file's code
        raise ConfigError(f"{path} is not a plain state dict of tensors: loading it would run code it holds, which "
                          f"latentforge refuses; {ADVICE}") from None
    except Exception as error:  # torch raises many types for foreign or corrupt files; all mean "unreadable"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(f"cannot read {path} as a PyTorch checkpoint ({first}); download it again") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f"{path} does not hold a state dict of tensors (got {type(state).__name__}); {ADVICE}")
    return state


def has_projection(source: ClipSource) -> bool:
    """Does the checkpoint hold CLIP's visual projection (a folder's visual_projection.weight, the official file's
    visual.head)? Reads key names only: safetensors headers, else the file through torch's memory map."""
    wanted = OFFICIAL_PROJECTION if source.kind == "wan-official" else PROJECTION
    return any(wanted in _keys(path) for path in source.weight_files)


def image_size(source: ClipSource) -> int:
    """The tower's input size without loading its weights: a folder's config.json, the official file's patch and
    position shapes."""
    if source.kind == "diffusers-folder":
        from transformers import CLIPVisionConfig

        return int(CLIPVisionConfig.from_pretrained(source.path, local_files_only=True).image_size)
    state = _mapped(source.path)
    patch, positions = state.get("visual.patch_embedding.weight"), state.get("visual.pos_embedding")
    if patch is None or positions is None:
        raise ConfigError(f"the official CLIP file {source.path} lacks visual.patch_embedding or "
                          f"visual.pos_embedding; {ADVICE}")
    return round((positions.shape[-2] - 1) ** 0.5) * int(patch.shape[-1])


def _keys(path: Path) -> set[str]:
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            return set(handle.keys())
    return set(_mapped(path))


def _mapped(path: Path) -> dict[str, torch.Tensor]:
    """A .pth/.bin state dict through torch's memory map: its keys and shapes, no tensor data read."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # a file older than torch's zip format cannot be mapped: read it whole, with its checks
        return read_official(path)


def load_model(source: ClipSource, embedding: bool = False) -> CLIPVisionModel | CLIPVisionModelWithProjection:
    """transformers' CLIPVisionModel holding exactly the checkpoint's tensors, fp32, eval mode. Missing, extra or
    misshapen keys are a ConfigError (from_pretrained would fill missing ones with random values and a warning).
    `embedding`: a CLIPVisionModelWithProjection when the checkpoint holds the visual projection (its image_embeds
    are the image embedding), else the CLIPVisionModel (its pooler_output is)."""
    from transformers import CLIPVisionModel, CLIPVisionModelWithProjection

    projected = False
    if source.kind == "wan-official":
        raw = read_official(source.path)
        state = official_to_transformers(raw)
        config = official_config(state)
        if embedding and OFFICIAL_PROJECTION in raw:
            head = raw[OFFICIAL_PROJECTION]
            if head.ndim != 2 or head.shape[0] != config.hidden_size:
                raise ConfigError(f"{source.path}: {OFFICIAL_PROJECTION} has shape {list(head.shape)}, not [width "
                                  f"{config.hidden_size}, embedding width]; {ADVICE}")
            state[PROJECTION] = head.t().contiguous()
            config.projection_dim, projected = int(head.shape[1]), True
        where: dict = {"pretrained_model_name_or_path": None, "config": config, "state_dict": state}
    else:
        where = {"pretrained_model_name_or_path": source.path}
        projected = embedding and has_projection(source)
    model_class = CLIPVisionModelWithProjection if projected else CLIPVisionModel
    try:
        model, info = model_class.from_pretrained(**where, dtype=torch.float32, local_files_only=True,
                                                  output_loading_info=True)
    except (OSError, ValueError, RuntimeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(f"cannot load the image encoder from {source.path} ({first}); {ADVICE}") from None
    # a CLIPVisionModelWithProjection folder also holds the projection, which the hidden states never use
    unexpected = sorted(k for k in info["unexpected_keys"] if projected or not k.startswith("visual_projection."))
    problems = [f"{label}: {', '.join(sorted(map(str, keys))[:10])}"
                for label, keys in (("missing keys", info["missing_keys"]), ("unexpected keys", unexpected),
                                    ("tensors of the wrong shape", info["mismatched_keys"])) if keys]  # fmt: skip
    if problems:
        raise ConfigError(f"image encoder checkpoint {source.path} is not a CLIP vision model ({source.kind}): "
                          f"{'; '.join(problems)}; {ADVICE}")
    return model.eval().requires_grad_(False)
