"""Tiny real-architecture text encoders (random weights) for the demo and the tests.

`make_tiny_t5` / `make_tiny_umt5` save, into a folder that `from_pretrained` loads, a transformers
T5EncoderModel / UMT5EncoderModel with seeded random weights (the same bytes on every CPU: see `seeded_weights`)
and a T5-style tokenizer (Unigram +
Metaspace, `</s>` appended, pad 0 / eos 1 / unk 2) whose vocabulary is built from `corpus`
(or, for umT5, optionally a SentencePiece `spiece.model` as google/umt5-xxl ships), plus a provenance note
saying the weights are untrained, which the cache README then quotes.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from ..text.hf_encoder import PROVENANCE_NOTE_FILE

DEFAULT_CORPUS = (
    "a red ball rolls to the left",
    "the robot arm picks up a blue cube",
    "two boxes slide across a wooden table",
    "a green square moves up while a circle spins",
)
SPECIAL_TOKENS = ["<pad>", "</s>", "<unk>"]  # T5's ids 0, 1, 2
MARKER = "\u2581"  # SentencePiece's word-start marker


def _unigram_vocab(corpus: list[str] | tuple[str, ...], vocab_size: int) -> list[tuple[str, float]]:
    """Special tokens, every character alone and after the word marker, then the most frequent words, with
    log-frequency scores. Built, not trained: the `tokenizers` trainer is multi-threaded and may break ties
    differently from run to run, and the demo's cache must be the same bytes every time."""
    words: Counter[str] = Counter()
    for line in corpus:
        words.update(f"{MARKER}{word}" for word in unicodedata.normalize("NFKC", line).split())
    characters = sorted({c for word in words for c in word[1:]})
    pieces = [MARKER, *characters, *(f"{MARKER}{c}" for c in characters if f"{MARKER}{c}" not in words)]
    vocab = [(token, 0.0) for token in SPECIAL_TOKENS] + [(piece, -20.0) for piece in pieces]
    total = sum(words.values())
    room = max(0, vocab_size - len(vocab))
    ranked = sorted(words.items(), key=lambda item: (-item[1], item[0]))[:room]
    return vocab + [(word, math.log(count / total)) for word, count in ranked]


def _train_tokenizer(folder: Path, corpus: list[str] | tuple[str, ...], vocab_size: int) -> int:
    tokenizer = Tokenizer(models.Unigram(_unigram_vocab(corpus, vocab_size), unk_id=SPECIAL_TOKENS.index("<unk>")))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=MARKER, prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement=MARKER, prepend_scheme="always")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "T5Tokenizer",
        "pad_token": "<pad>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "extra_ids": 0,
        "model_max_length": 512,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return tokenizer.get_vocab_size()


def _train_spiece(folder: Path, corpus: list[str] | tuple[str, ...], vocab_size: int) -> int:
    """A SentencePiece `spiece.model` and no tokenizer.json: the layout google/umt5-xxl ships."""
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(  # a soft vocab limit: a tiny corpus yields fewer pieces
        sentence_iterator=iter(list(corpus)), model_prefix=str(folder / "spiece"), model_type="unigram",
        vocab_size=vocab_size, hard_vocab_limit=False, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, minloglevel=2,
    )
    (folder / "spiece.vocab").unlink()
    config = {"tokenizer_class": "T5Tokenizer", "pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>",
              "extra_ids": 0, "model_max_length": 512}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return sentencepiece.SentencePieceProcessor(model_file=str(folder / "spiece.model")).get_piece_size()


def seeded_weights(model: torch.nn.Module, seed: int) -> None:
    """Overwrite every parameter with values drawn by numpy from `seed`, in `named_parameters` order, at the
    scales of transformers' T5 initialisation (factor 1): each matrix uniform with the standard deviation
    `_INIT_STD` gives its layer, norm weights U[0.5, 1.5] (not all 1, which would hide a swapped parameter).

    Not torch's initialisers: torch draws normal values with vectorised code whose results depend on the CPU's
    vector width (AVX2 or AVX-512), and so would the demo's weights and every byte its cache holds. Here only
    integers are drawn (numpy's bounded integer sampler) and turned into floats by exact IEEE steps, so the weights
    are the same bits on any CPU for the pinned numpy."""
    rng = np.random.default_rng(seed)
    steps = 2**23
    config = model.config
    with torch.no_grad():
        for name, param in model.named_parameters():
            unit = (rng.integers(-steps, steps, size=tuple(param.shape), dtype=np.int64) + 0.5) / steps  # (-1, 1)
            if param.ndim == 1:
                values = 1.0 + 0.5 * unit
            else:  # U(-b, b) has standard deviation b / sqrt(3)
                values = unit * math.sqrt(3.0) * _INIT_STD[name.rsplit(".", 2)[-2]](config)
            param.copy_(torch.from_numpy(values.astype(np.float32)))


# {layer name: its weights' standard deviation}, as T5PreTrainedModel._init_weights sets them
_INIT_STD = {
    "shared": lambda c: 1.0,
    "relative_attention_bias": lambda c: c.d_model**-0.5,
    "q": lambda c: (c.d_model * c.d_kv) ** -0.5,
    "k": lambda c: c.d_model**-0.5,
    "v": lambda c: c.d_model**-0.5,
    "o": lambda c: (c.num_heads * c.d_kv) ** -0.5,
    "wi": lambda c: c.d_model**-0.5,
    "wi_0": lambda c: c.d_model**-0.5,
    "wi_1": lambda c: c.d_model**-0.5,
    "wo": lambda c: c.d_ff**-0.5,
}


def _make(kind: str, folder: Path, d_model: int, corpus, vocab_size: int, seed: int, spiece: bool = False) -> Path:
    from transformers import T5Config, T5EncoderModel, UMT5Config, UMT5EncoderModel

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = (_train_spiece if spiece else _train_tokenizer)(folder, corpus, vocab_size)
    config_class, model_class = (T5Config, T5EncoderModel) if kind == "t5" else (UMT5Config, UMT5EncoderModel)
    config = config_class(
        vocab_size=vocab, d_model=d_model, d_kv=32, d_ff=128, num_layers=2, num_heads=4,
        feed_forward_proj="relu" if kind == "t5" else "gated-gelu",
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    )
    model = model_class(config).eval()
    seeded_weights(model, seed)
    model.save_pretrained(folder)
    note = (f"text embeddings come from an untrained tiny {model_class.__name__} (random weights drawn by numpy "
            f"from seed {seed}).")
    (folder / PROVENANCE_NOTE_FILE).write_text(note + "\n", encoding="utf-8")
    return folder


def make_tiny_t5(folder: str | Path, d_model: int = 1024, corpus=DEFAULT_CORPUS, vocab_size: int = 200,
                 seed: int = 0) -> Path:
    """A T5 (v1.0 layout like google-t5/t5-11b: ReLU feed-forward) encoder folder of width d_model."""
    return _make("t5", Path(folder), d_model, corpus, vocab_size, seed)


def make_tiny_umt5(folder: str | Path, d_model: int = 4096, corpus=DEFAULT_CORPUS, vocab_size: int = 200,
                   seed: int = 0, spiece: bool = False) -> Path:
    """A umT5 (gated-GELU, per-layer relative bias) encoder folder of width d_model.

    spiece=True saves a SentencePiece spiece.model instead of tokenizer.json, as google/umt5-xxl does
    (loading it needs sentencepiece and protobuf).
    """
    return _make("umt5", Path(folder), d_model, corpus, vocab_size, seed, spiece)
