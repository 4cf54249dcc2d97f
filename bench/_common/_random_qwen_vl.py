"""A Qwen2.5-VL folder with random weights for the captioning bench: the Qwen2.5-VL-7B-Instruct architecture (or
the same architecture shrunk for --tiny), a word-level tokenizer, Qwen's image processor and a chat template; it loads
through the project's qwen2.5-vl captioner like a downloaded folder.

Random weights never end a caption, so the folder makes every caption exactly `caption_tokens` tokens long, the way
a trained model writes one: the final norm's weight is zero (every logit is 0, the whole network still runs), the
end token is id 0 (the first of equal logits, which greedy decoding picks) and generation_config.json sets
min_new_tokens, which holds the end token back until then. Each step then writes token 1, and the end comes at step
`caption_tokens + 1`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

# Qwen/Qwen2.5-VL-7B-Instruct's config.json
TEXT_7B = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=128000, rms_norm_eps=1e-6,
               rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]},
               tie_word_embeddings=False)
VISION_7B = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
                 patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                 fullatt_block_indexes=[7, 15, 23, 31], tokens_per_second=2)
# the same architecture at a size the CPU runs in seconds
TEXT_TINY = {**TEXT_7B, "vocab_size": 4096, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2,
             "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]}}
VISION_TINY = {**VISION_7B, "depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2,
               "out_hidden_size": 64, "fullatt_block_indexes": [1]}
SPECIAL = ["<|im_end|>", "<|endoftext|>", "<|im_start|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
           "<|video_pad|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _vocab(size: int) -> dict[str, int]:
    """id 0 is the end token; the specials follow; words w<i> fill the rest, so every id decodes."""
    words = [*SPECIAL[:1], "scene", *SPECIAL[1:]]
    words += [f"w{i}" for i in range(size - len(words) - 1)] + ["[UNK]"]
    return {word: i for i, word in enumerate(words)}


def make_random_qwen_vl(folder: Path, caption_tokens: int, tiny: bool, device: str) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2VLImageProcessorPil,
    )

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text, vision = (TEXT_TINY, VISION_TINY) if tiny else (TEXT_7B, VISION_7B)
    vocab = _vocab(text["vocab_size"])
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token="[UNK]", additional_special_tokens=SPECIAL[1:])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    Qwen2VLImageProcessorPil().save_pretrained(folder)  # Qwen's defaults: 56x56 to 28x28x(128x128) pixels
    ids = dict(bos_token_id=vocab["<|endoftext|>"], eos_token_id=vocab["<|im_end|>"],
               pad_token_id=vocab["<|endoftext|>"])
    config = Qwen2_5_VLConfig(
        text_config={**text, **ids}, vision_config=vision, image_token_id=vocab["<|image_pad|>"],
        video_token_id=vocab["<|video_pad|>"], vision_start_token_id=vocab["<|vision_start|>"],
        vision_end_token_id=vocab["<|vision_end|>"])
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16 if device.startswith("cuda") else torch.float32)
    try:
        with torch.device(device):
            model = Qwen2_5_VLForConditionalGeneration(config).eval()
    finally:
        torch.set_default_dtype(previous)
    with torch.no_grad():
        model.model.language_model.norm.weight.zero_()
    model.generation_config.eos_token_id = ids["eos_token_id"]
    model.generation_config.pad_token_id = ids["pad_token_id"]
    model.generation_config.min_new_tokens = caption_tokens
    model.save_pretrained(folder)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    note = {"architecture": "Qwen2.5-VL-7B-Instruct" if not tiny else "Qwen2.5-VL, shrunk", "weights": "random",
            "caption_tokens": caption_tokens}
    (folder / "bench_note.json").write_text(json.dumps(note), encoding="utf-8")
    return folder
