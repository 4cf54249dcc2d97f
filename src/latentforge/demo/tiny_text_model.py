"""A tiny T5 encoder of the real architecture (random weights) and a tokenizer trained on given sentences.

Saved as an ordinary transformers folder, so it loads through exactly the code that loads google-t5/t5-11b.
Used by the demo (no weights can be downloaded there) and by the tests.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, T5Config, T5EncoderModel, UMT5Config, UMT5EncoderModel

SPECIAL_TOKENS = ["<pad>", "</s>", "<unk>"]  # ids 0, 1, 2 as in T5's own vocabulary


def train_tokenizer(corpus: list[str], vocab_size: int = 400) -> PreTrainedTokenizerFast:
    """A Unigram tokenizer (T5's kind) that appends </s> like T5's tokenizer does."""
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, unk_token="<unk>")
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def make_tiny_t5(
    folder: Path,
    corpus: list[str],
    d_model: int = 1024,
    umt5: bool = False,
    seed: int = 0,
) -> Path:
    """Write a T5 (or umT5) encoder folder: config.json, model.safetensors and tokenizer files."""
    folder = Path(folder)
    tokenizer = train_tokenizer(corpus)
    config_cls, model_cls = (UMT5Config, UMT5EncoderModel) if umt5 else (T5Config, T5EncoderModel)
    config = config_cls(
        vocab_size=len(tokenizer),
        d_model=d_model,
        d_kv=16,
        d_ff=64,
        num_layers=2,
        num_heads=2,
        relative_attention_num_buckets=8,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    torch.manual_seed(seed)
    model = model_cls(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
