"""`cosmos t5` writes the pickles Cosmos-Predict2's own `scripts/get_t5_embeddings.py` writes, byte for byte on
the same device. The reference is that script's call (its `CosmosT5TextEncoder.encode_prompts`) written with
transformers here, not latentforge's encoder. Each prompt run alone at its own length (`--padding none`) differs
from it in a few float16 values: the padded call takes other matmul shapes."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
import transformers

from latentforge.cli.main import main
from latentforge.demo.tiny_text_model import make_tiny_t5

CORPUS = ["the robot arm picks up a cube", "a red ball rolls off the table", "place it gently on the plate"]
PROMPTS = {
    "clip_a": "the robot arm picks up a cube and places it gently on the plate",
    "clip_b": "a red ball rolls",
    "clip_c": "",
    "clip_d": "a red ball rolls off the table " * 120,  # past 512 tokens: truncated, ends with </s>
}


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    return make_tiny_t5(tmp_path_factory.mktemp("t5"), d_model=64, corpus=CORPUS * 4)


def cosmos_script_pickle(tokenizer, model, prompt: str) -> bytes:
    """get_t5_embeddings.py for one metas/ prompt: encode_prompts(prompt, max_length=None -> 512, return_mask=True),
    float16, trimmed to the mask's sum, pickled (protocol 4: pickle's default on the Pythons Cosmos supports)."""
    with torch.inference_mode():
        batch_encoding = tokenizer([prompt], return_tensors="pt", truncation=True, padding="max_length",
                                   max_length=512, return_length=True, return_offsets_mapping=False)
        attn_mask = batch_encoding.attention_mask
        encoded_text = model(input_ids=batch_encoding.input_ids, attention_mask=attn_mask).last_hidden_state
        lengths = attn_mask.sum(dim=1)
        for batch_id in range(encoded_text.shape[0]):
            encoded_text[batch_id][lengths[batch_id]:] = 0
    encoded_text = encoded_text.numpy().astype(np.float16)
    trimmed = [encoded_text[batch_id][: lengths[batch_id]] for batch_id in range(encoded_text.shape[0])]
    return pickle.dumps(trimmed, protocol=4)


def test_cosmos_t5_pickles_equal_cosmos_script_bytes(tmp_path, t5_folder):
    (tmp_path / "metas").mkdir()
    for stem, prompt in PROMPTS.items():
        (tmp_path / "metas" / f"{stem}.txt").write_text(prompt, encoding="utf-8")
    assert main(["cosmos", "t5", str(tmp_path), "--t5", str(t5_folder), "--device", "cpu"]) == 0
    tokenizer = transformers.T5TokenizerFast.from_pretrained(t5_folder)  # the class Cosmos' encoder loads
    model = transformers.T5EncoderModel.from_pretrained(t5_folder).eval()  # no dtype given, as Cosmos
    for stem, prompt in PROMPTS.items():
        written = (tmp_path / "t5_xxl" / f"{stem}.pickle").read_bytes()
        assert written == cosmos_script_pickle(tokenizer, model, prompt.strip()), stem
    n_tokens = {stem: len(pickle.loads((tmp_path / "t5_xxl" / f"{stem}.pickle").read_bytes())[0]) for stem in PROMPTS}
    assert n_tokens["clip_c"] == 1 and n_tokens["clip_d"] == 512  # "" is just </s>; the long prompt was cut
