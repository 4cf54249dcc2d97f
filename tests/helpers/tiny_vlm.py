"""A tiny real-architecture Qwen2.5-VL folder for the captioner's tests: transformers'
Qwen2_5_VLForConditionalGeneration (one text layer of width 32, a one-block vision tower), a word-level tokenizer
with Qwen's special tokens and a chat template, and Qwen's image processor; it loads with `from_pretrained`.

Its weights are random except where a test needs a known outcome: every text layer's output projections are zero and
the token embeddings one-hot, so the language model is a chain of next words, and greedy decoding writes CAPTION and
then its end token for every window (the vision tower runs, but its output does not reach the words)."""

from __future__ import annotations

from pathlib import Path

import torch

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
           "<|video_pad|>"]
WORDS = ["user", "assistant", "describe", "this", "video", "in", "one", "sentence", "detail", "a", "red", "ball",
         "rolls", "left", "."]
CAPTION = "a red ball rolls left ."
DECODED = "a red ball rolls left."  # CAPTION as the tokenizer decodes it (no space before the full stop)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
HIDDEN = 32


def make_tiny_qwen_vl(folder: str | Path, seed: int = 0) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2VLImageProcessorPil,
    )

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {token: i for i, token in enumerate([*SPECIAL, *WORDS, "[UNK]"])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # words joined by spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token="[UNK]", additional_special_tokens=SPECIAL[1:])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    Qwen2VLImageProcessorPil(min_pixels=28 * 28, max_pixels=56 * 56).save_pretrained(folder)
    config = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                         bos_token_id=vocab["<|endoftext|>"], eos_token_id=vocab["<|im_end|>"],
                         pad_token_id=vocab["<|endoftext|>"]),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=HIDDEN,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                           fullatt_block_indexes=[0]),
        image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"], vision_end_token_id=vocab["<|vision_end|>"],
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    _chain(model, vocab)
    model.generation_config.eos_token_id = vocab["<|im_end|>"]
    model.generation_config.pad_token_id = vocab["<|endoftext|>"]
    model.save_pretrained(folder)
    return folder


def _chain(model, vocab: dict[str, int]) -> None:
    """The language model as a fixed next-word table: "assistant" (the prompt's last word: this word-level
    tokenizer drops the template's newlines) -> CAPTION -> <|im_end|>."""
    words = ["assistant", *CAPTION.split(), "<|im_end|>"]
    with torch.no_grad():
        language = model.model.language_model
        for layer in language.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        language.embed_tokens.weight.copy_(torch.eye(len(vocab), HIDDEN))
        language.norm.weight.fill_(1.0)
        head = torch.zeros_like(model.lm_head.weight)
        for word, following in zip(words, words[1:]):
            head[vocab[following], vocab[word]] = 1.0
        model.lm_head.weight.copy_(head)
