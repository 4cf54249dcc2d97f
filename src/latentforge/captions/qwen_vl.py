"""qwen2.5-vl: captions from a Qwen2.5-VL model (transformers' Qwen2_5_VLForConditionalGeneration), greedy.

The window's sampled frames go in as a list of images, as the chat template places them: the folder's tokenizer
renders the chat, the folder's image processor turns each frame into patches, and each image placeholder is widened
to the image's number of merged patches (what Qwen2_5_VLProcessor does; its video route needs torchvision, the
image route only the image processor). Generation is greedy (no sampling, one beam), so a window's caption is a
function of its frames, the prompt and the model's files on one device and software stack.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import CaptionsConfig
from ..errors import ConfigError
from ..text.hf_encoder import check_weight_file, digest_of_files, weight_files
from .base import Captioner, Generation

# model_type in config.json -> the transformers class that generates with it
ARCHITECTURES = {"qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration"}
# the files besides the weights that change what the model writes: its config, the generation defaults, the
# tokenizer, the image processor and the chat template
SETTINGS_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json",
                  "merges.txt", "special_tokens_map.json", "preprocessor_config.json", "processor_config.json",
                  "chat_template.jinja", "chat_template.json")
IMAGE_TOKEN = "<|image_pad|>"


def _folder(model: str | None) -> Path:
    folder = Path(model or "").expanduser()
    if not model or not (folder / "config.json").is_file():
        raise ConfigError(f"captions.model={model!r} is not a model folder (no config.json); give the local folder "
                          "of a Qwen2.5-VL model (config.json, *.safetensors, tokenizer and preprocessor files)")
    if not weight_files(folder):
        raise ConfigError(f"captions.model={model!r}: no *.safetensors or pytorch_model*.bin weights in it")
    return folder


def _architecture(folder: Path) -> str:
    """The transformers class name of the folder's model, or a ConfigError naming what the folder holds."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"captions.model: cannot read {folder / 'config.json'} ({error})") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type not in ARCHITECTURES:
        named = ", ".join(config.get("architectures") or []) if isinstance(config, dict) else ""
        raise ConfigError(
            f"captions.model={str(folder)!r} holds a {model_type!r} model{f' ({named})' if named else ''}, not a "
            f"Qwen2.5-VL-class model (model_type {', '.join(ARCHITECTURES)}); the qwen2.5-vl captioner generates "
            "with Qwen2_5_VLForConditionalGeneration: give the folder of such a model "
            "(e.g. Qwen/Qwen2.5-VL-7B-Instruct)")
    return ARCHITECTURES[model_type]


def _dtype_name(device: torch.device | str) -> str:
    """bf16 on a GPU (how the released models run), fp32 on the CPU, which lacks fast bf16 on many machines."""
    return "bfloat16" if torch.device(device).type == "cuda" else "float32"


class QwenVLCaptioner(Captioner):
    name = "qwen2.5-vl"

    def __init__(self, folder: Path, device: torch.device | str):
        import transformers

        self.folder = folder
        self.device = torch.device(device)
        self.dtype = getattr(torch, _dtype_name(self.device))
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
        self.tokenizer.padding_side = "left"  # batched generation continues every prompt from its last token
        self.image_processor = transformers.AutoImageProcessor.from_pretrained(folder, local_files_only=True)
        if not self.tokenizer.chat_template:
            template = folder / "chat_template.jinja"
            if not template.is_file():
                raise ConfigError(f"captions.model={str(folder)!r} has no chat template (tokenizer_config.json or "
                                  "chat_template.jinja); copy the model's own files into the folder")
            self.tokenizer.chat_template = template.read_text(encoding="utf-8")
        model_class = getattr(transformers, _architecture(folder))
        self.model = model_class.from_pretrained(folder, dtype=self.dtype, local_files_only=True)
        self.model.to(self.device).eval()
        self.image_token_id = int(self.model.config.image_token_id)
        self.merge = int(getattr(self.image_processor, "merge_size", 2))

    @classmethod
    def preflight(cls, cfg: CaptionsConfig) -> None:
        folder = _folder(cfg.model)
        _architecture(folder)
        for path in weight_files(folder):
            check_weight_file(path)
        if cfg.sha256:
            actual = cls.checkpoint_digest(str(folder))
            if actual != cfg.sha256.lower():
                raise ConfigError(
                    f"captions.model={cfg.model!r}: the weights' SHA-256 is {actual}, but captions.sha256 pins "
                    f"{cfg.sha256}; copy the model again, or set captions.sha256 to the digest of the model you mean "
                    f"(`cd {folder} && sha256sum *.safetensors | sha256sum`)")

    @classmethod
    def checkpoint_digest(cls, model: str) -> str:
        return digest_of_files(weight_files(_folder(model)))

    @classmethod
    def load(cls, cfg: CaptionsConfig, device: torch.device | str) -> QwenVLCaptioner:
        cls.preflight(cfg)
        return cls(_folder(cfg.model), device)

    @classmethod
    def identity(cls, cfg: CaptionsConfig, device: torch.device | str) -> dict[str, Any]:
        folder = _folder(cfg.model)
        present = [folder / name for name in SETTINGS_FILES if (folder / name).is_file()]
        return {"name": cls.name, "model_sha256": digest_of_files(weight_files(folder)),
                "files_sha256": digest_of_files(present), "dtype": _dtype_name(device)}

    def _chat(self, count: int, prompt: str) -> str:
        content = [{"type": "image"} for _ in range(count)] + [{"type": "text", "text": prompt}]
        return self.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                  add_generation_prompt=True)

    @torch.inference_mode()
    def generate(self, windows: list[np.ndarray], prompt: str, max_new_tokens: int) -> list[Generation]:
        if not windows:
            return []
        images = [frame for window in windows for frame in window]
        pixels = self.image_processor(images=images, return_tensors="pt")
        grids = pixels["image_grid_thw"]
        per_image = (grids.prod(-1) // self.merge**2).tolist()
        texts, start = [], 0
        for window in windows:
            text = self._chat(len(window), prompt)
            pieces = text.split(IMAGE_TOKEN)
            if len(pieces) != len(window) + 1:
                raise ConfigError(f"captions.model={str(self.folder)!r}: its chat template placed {len(pieces) - 1} "
                                  f"images for {len(window)} frames; use the model's own chat template")
            widened = [IMAGE_TOKEN * per_image[start + i] for i in range(len(window))]
            texts.append("".join(p + w for p, w in zip(pieces, widened + [""])))
            start += len(window)
        tokens = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        input_ids = tokens["input_ids"].to(self.device)
        config = copy.deepcopy(self.model.generation_config)
        config.do_sample, config.num_beams, config.max_new_tokens = False, 1, max_new_tokens
        config.temperature = config.top_p = config.top_k = None
        if config.pad_token_id is None:
            config.pad_token_id = self.tokenizer.pad_token_id
        out = self.model.generate(
            input_ids=input_ids, attention_mask=tokens["attention_mask"].to(self.device),
            pixel_values=pixels["pixel_values"].to(self.device, self.dtype), image_grid_thw=grids.to(self.device),
            mm_token_type_ids=(input_ids == self.image_token_id).int(), generation_config=config)
        ends = config.eos_token_id if isinstance(config.eos_token_id, list) else [config.eos_token_id]
        results = []
        for row in out[:, input_ids.shape[1]:].cpu().tolist():
            ended = any(token in ends for token in row)
            if ended:
                row = row[: min(row.index(token) for token in ends if token in row)]
            text = self.tokenizer.decode(row, skip_special_tokens=True).strip()
            results.append(Generation(text=text, ended=ended))
        return results
