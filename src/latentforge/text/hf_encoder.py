"""Shared logic of the transformers-backed text encoders (t5, umt5): load, dedup, encode, zero, fingerprint.

The rows are Cosmos-Predict2's `CosmosT5TextEncoder.encode_prompts`: tokens truncated to `max_length`, the
last hidden state, and every position at or past the prompt's length exactly 0. Cosmos pads every prompt to
`max_length` and masks the padding out of attention, so the states of the prompt's own tokens do not depend on
it. Two ways to run it (`text.padding`):
- `none`: each distinct prompt runs alone at its own token count. Its row depends on nothing else in the build,
  and the padding the reference computes and discards costs nothing: a 40-token caption does 1/12 of the work of
  512 positions. Padding changes the matmul shapes, so a few values differ from Cosmos' by float rounding.
- `max_length`: each prompt runs alone as Cosmos' script runs it, padded to `max_length` with the attention mask:
  the same call, so the same bits on the same device.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from ..config import TextConfig
from ..devices import wait_for_device
from ..errors import ConfigError
from ..hashing import sha256_file
from ..hub import cached_snapshot, hub_cache_folder, looks_like_hub_id
from .base import POSITIONS, TextBatch, TextEncoder

# A model folder may say where its weights come from (the demo's tiny models are untrained); the cache
# README quotes it so nobody mistakes such embeddings for a real encoder's.
PROVENANCE_NOTE_FILE = "latentforge_provenance.txt"


# Files whose bytes define the tokenizer: hashing them makes a changed vocabulary change the fingerprint.
TOKENIZER_FILES = ("tokenizer.json", "spiece.model", "tokenizer_config.json", "special_tokens_map.json")


def digest_of_files(files: list[Path]) -> str:
    """SHA-256 over `sha256sum`-style lines `<sha256>  <file name>` sorted by name (names only, no paths)."""
    lines = "".join(f"{sha256_file(f)}  {f.name}\n" for f in sorted(files, key=lambda f: f.name))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def weight_files(folder: Path) -> list[Path]:
    """The files transformers loads weights from: safetensors when present (it prefers them), else .bin."""
    safetensors = sorted(folder.glob("*.safetensors"))
    return safetensors or sorted(folder.glob("pytorch_model*.bin"))


def unique_in_order(prompts: list[str]) -> tuple[list[str], np.ndarray]:
    """Distinct prompts in first-appearance order, and for each input prompt the index of its distinct row."""
    position: dict[str, int] = {}
    inverse = np.array([position.setdefault(p, len(position)) for p in prompts], dtype=np.int64)
    return list(position), inverse


def _check_tokenizer_dependencies(folder: Path, name: str) -> None:
    """A folder with only spiece.model (the google/umt5-xxl layout) is converted by transformers, which needs
    sentencepiece and protobuf; without them it fails with an unrelated tiktoken message."""
    if (folder / "tokenizer.json").is_file() or not (folder / "spiece.model").is_file():
        return
    import importlib.util

    missing = [m for m in ("sentencepiece", "google.protobuf") if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        raise ConfigError(
            f"{name}: the tokenizer of {folder} is spiece.model only; reading it needs "
            f"{' and '.join(missing)}: pip install sentencepiece protobuf"
        )


def _tokenizer_class(folder: Path) -> Any:
    """The class the folder's tokenizer_config.json declares, else AutoTokenizer.

    transformers 5 maps model_type "umt5" to its generic backend, which cannot read the spiece.model that
    google/umt5-xxl ships; the declared "T5Tokenizer" can.
    """
    import transformers

    config_file = folder / "tokenizer_config.json"
    declared = None
    if config_file.is_file():
        declared = json.loads(config_file.read_text(encoding="utf-8")).get("tokenizer_class")
    declared_class = getattr(transformers, str(declared).removesuffix("Fast"), None) if declared else None
    return declared_class or transformers.AutoTokenizer


def model_folder(path: str, name: str) -> Path:
    """The local folder `path` names (a folder, or a hub id already in the local hub cache), checked to hold
    config.json and weights. Never downloads: a text model is tens of GB, fetched once on purpose."""
    folder = Path(path).expanduser()
    if looks_like_hub_id(path):
        snapshot = cached_snapshot(path)
        if snapshot is None:
            raise ConfigError(
                f"{name}: text.path {path!r} is a Hugging Face hub id that is not in the local cache "
                f"({hub_cache_folder()}); latentforge never downloads text models: fetch it once with "
                f"`hf download {path}` (or set HF_HOME to the cache that holds it), or give the local folder"
            )
        folder = snapshot
    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"{name}: text.path {path!r} is not a model folder (no config.json); give the local folder holding "
            "config.json, the weights and the tokenizer files (--text-path), or a hub id in the local cache"
        )
    if not weight_files(folder):
        raise ConfigError(f"{name}: no *.safetensors or pytorch_model*.bin weights in {path!r}")
    return folder


def check_weight_file(path: Path) -> None:
    """A safetensors file whose header reads (a truncated download fails here); .bin files load in the ranks."""
    if path.suffix != ".safetensors":
        return
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            handle.keys()
    except Exception as error:  # safetensors raises its own SafetensorError and OSError for bad files
        raise ConfigError(f"cannot read the weights {path} ({error}); the file is truncated or not safetensors: "
                          "download it again") from None


def load_tokenizer(folder: Path, name: str) -> Any:
    """The folder's tokenizer, padding and truncating on the right: zeroing by position (>= length) and
    truncation both assume the T5 default, text first and pads after."""
    _check_tokenizer_dependencies(folder, name)
    try:
        tokenizer = _tokenizer_class(folder).from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(f"{name}: cannot load the tokenizer of {folder} ({first_line}); the folder needs "
                          "tokenizer.json or spiece.model with tokenizer_config.json") from None
    tokenizer.padding_side = "right"
    tokenizer.truncation_side = "right"
    return tokenizer


class HFTextEncoder(TextEncoder):
    """A transformers encoder-only model plus the tokenizer of the same local folder."""

    model_class_name: ClassVar[str] = ""  # attribute of `transformers`, e.g. "T5EncoderModel"
    precisions = {"fp32": 1e-5, "bf16": 2e-2}  # fp16 overflows T5's feed-forward activations

    def __init__(
        self,
        path: str,
        precision: str = "fp32",
        max_length: int = 512,
        device: torch.device | str = "cpu",
        padding: str = "none",
    ):
        if precision not in self.precisions:
            raise ConfigError(
                f"text precision {precision!r} is not allowed for {self.name}; allowed: "
                f"{', '.join(self.precisions)} (fp16 overflows T5's feed-forward activations)"
            )
        if max_length < 2:
            raise ConfigError(f"{self.name}: max_length={max_length} must be >= 2 (a token and </s>)")
        if padding not in POSITIONS:
            raise ConfigError(f"{self.name}: text padding {padding!r} is not allowed; allowed: {', '.join(POSITIONS)}")
        self.folder = model_folder(path, self.name)
        note = self.folder / PROVENANCE_NOTE_FILE
        self.provenance_note = note.read_text(encoding="utf-8").strip() if note.is_file() else None
        self.precision = precision
        self.max_length = max_length
        self.padding = padding
        self.device = torch.device(device)
        self._fingerprint: dict[str, Any] | None = None

        import transformers

        self.tokenizer = load_tokenizer(self.folder, self.name)
        model_class = getattr(transformers, self.model_class_name)
        dtype = torch.float32 if precision == "fp32" else torch.bfloat16
        self.model = model_class.from_pretrained(self.folder, dtype=dtype, local_files_only=True)
        self.model.to(self.device).eval()

    @classmethod
    def preflight(cls, cfg: TextConfig) -> None:
        """The folder (or cached hub id), its config, tokenizer and weight headers, before a build writes
        anything; the weights themselves load in the ranks."""
        if cfg.source == "pickles" and not cfg.empty_prompt:
            return
        if not cfg.path:
            raise ConfigError(f"text.path is empty; give the local {cls.name} model folder with --text-path")
        folder = model_folder(cfg.path, cls.name)
        load_tokenizer(folder, cls.name)
        for path in weight_files(folder):
            check_weight_file(path)

    @classmethod
    def load(cls, cfg: TextConfig, device: torch.device | str = "cpu") -> HFTextEncoder:
        if not cfg.path:
            raise ConfigError(f"text.path is empty; give the local {cls.name} model folder")
        return cls(cfg.path, precision=cfg.precision, max_length=cfg.max_length, device=device, padding=cfg.padding)

    @property
    def embed_dim(self) -> int:
        return int(self.model.config.d_model)

    def encode(self, prompts: list[str]) -> TextBatch:
        distinct, inverse = unique_in_order(list(prompts))
        embeddings = np.zeros((len(distinct), self.max_length, self.embed_dim), dtype=np.float32)
        lengths = np.zeros(len(distinct), dtype=np.int64)
        if distinct:
            states = self.encode_prompts(distinct)
            for i, row in enumerate(states):
                embeddings[i, : len(row)] = row
                lengths[i] = len(row)
        truncated = self._untruncated_counts(distinct) > self.max_length
        return TextBatch(embeddings=embeddings[inverse], lengths=lengths[inverse], truncated=truncated[inverse])

    @torch.inference_mode()
    def encode_prompts(self, prompts: list[str]) -> list[np.ndarray]:
        """Each prompt's last hidden state over its own tokens, float32 [length, D]: every prompt runs alone, all
        are launched behind whatever the device already has queued, and the host sleeps until the one copy back."""
        states = [self._prompt_states(prompt) for prompt in prompts]
        together = torch.cat(states)
        wait_for_device(self.device)
        together = together.cpu().numpy()
        return np.split(together, np.cumsum([len(state) for state in states])[:-1])

    def _prompt_states(self, prompt: str) -> torch.Tensor:
        """One prompt's states [length, D] on the device, queued (no wait)."""
        if self.padding == "none":
            ids = self.tokenizer(prompt, max_length=self.max_length, truncation=True, return_tensors="pt")["input_ids"]
            return self.model(input_ids=ids.to(self.device)).last_hidden_state[0].float()
        # Cosmos' get_t5_embeddings.py: a list of one prompt, padded to max_length, the mask passed to the model;
        # its length is the mask's sum, and the states past it are what Cosmos zeroes and its pickle trims
        tokens = self.tokenizer([prompt], padding="max_length", max_length=self.max_length, truncation=True,
                                return_tensors="pt")
        length = int(tokens["attention_mask"].sum())
        hidden = self.model(input_ids=tokens["input_ids"].to(self.device),
                            attention_mask=tokens["attention_mask"].to(self.device)).last_hidden_state
        return hidden[0, :length].float()

    def _untruncated_counts(self, prompts: list[str]) -> np.ndarray:
        if not prompts:
            return np.zeros(0, dtype=np.int64)
        ids = self.tokenizer(prompts, truncation=False, verbose=False)["input_ids"]
        return np.array([len(row) for row in ids], dtype=np.int64)

    def unknown_fractions(self, prompts: list[str]) -> list[float | None]:
        """The share of `<unk>` among each prompt's own tokens: the whole caption, untruncated, without the `</s>`
        the tokenizer appends, rounded to 4 decimals (what the manifest records and the threshold is held to). A
        T5 tokenizer turns a run of characters its vocabulary lacks (Chinese text, for t5-11b) into one `<unk>`, so
        a caption of such text alone is `▁`, `<unk>`: 0.5. The empty prompt has no tokens: 0.0."""
        unknown = self.tokenizer.unk_token_id
        if unknown is None:
            return [None] * len(prompts)
        if not prompts:
            return []
        rows = self.tokenizer(prompts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        return [round(row.count(unknown) / len(row), 4) if row else 0.0 for row in rows]

    def fingerprint(self) -> dict[str, Any]:
        if self._fingerprint is None:
            tokenizer_files = [self.folder / n for n in TOKENIZER_FILES if (self.folder / n).is_file()]
            self._fingerprint = {
                "name": self.name,
                "model_class": self.model_class_name,
                "weights_sha256": digest_of_files(weight_files(self.folder)),
                "tokenizer_sha256": digest_of_files(tokenizer_files),
                "precision": self.precision,
                "max_length": self.max_length,
                "positions": POSITIONS[self.padding],  # its own token count, or padded to max_length as Cosmos
                "dim": self.embed_dim,
            }
        return dict(self._fingerprint)
