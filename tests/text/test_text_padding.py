"""`text.padding=max_length`: the encoder runs each prompt as Cosmos' `CosmosT5TextEncoder.encode_prompts` does
(padded to max_length, the attention mask passed), so its rows are that call's bits on the same device; the
reference is the call written with transformers here. A build records the mode and a deep verify re-reads it."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch
import transformers

from helpers.builds import build_quietly, read_manifest, tiny_config
from latentforge.builder.resume import check_config, resume_key
from latentforge.config import TextConfig
from latentforge.demo.tiny_text_model import make_tiny_t5
from latentforge.errors import ConfigError, LatentforgeError
from latentforge.text.t5 import T5TextEncoder
from latentforge.verification.reencode import Overrides, recorded_config

CORPUS = ["a red ball rolls to the left", "the robot arm picks up a blue cube", "two boxes slide on a table"]
PROMPTS = ["the robot arm picks up a blue cube and two boxes slide", "a red ball rolls", "", "boxes slide left " * 200]


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    return make_tiny_t5(tmp_path_factory.mktemp("t5"), d_model=64, corpus=CORPUS * 4)


def cosmos_rows(folder, prompts: list[str], max_length: int = 512) -> list[np.ndarray]:
    """Cosmos' get_t5_embeddings.py call per prompt: one prompt padded to max_length with its mask, float32
    states [attention_mask.sum(), D] (Cosmos zeroes the rest and its pickle drops it)."""
    tokenizer = transformers.T5TokenizerFast.from_pretrained(folder)
    model = transformers.T5EncoderModel.from_pretrained(folder).eval()
    rows = []
    with torch.inference_mode():
        for prompt in prompts:
            tokens = tokenizer([prompt], return_tensors="pt", truncation=True, padding="max_length",
                               max_length=max_length, return_length=True)
            hidden = model(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask).last_hidden_state
            rows.append(hidden[0, : int(tokens.attention_mask.sum())].numpy())
    return rows


def test_padded_rows_are_cosmos_bits(t5_folder):
    encoder = T5TextEncoder(str(t5_folder), padding="max_length")
    batch = encoder.encode(PROMPTS)
    for i, row in enumerate(cosmos_rows(t5_folder, PROMPTS)):
        assert batch.lengths[i] == len(row)
        np.testing.assert_array_equal(batch.embeddings[i, : len(row)], row)
        assert not batch.embeddings[i, len(row):].any()
    assert batch.lengths.tolist()[2:] == [1, 512] and batch.truncated.tolist() == [False, False, False, True]
    assert encoder.fingerprint()["positions"] == "max_length"
    assert T5TextEncoder(str(t5_folder)).fingerprint()["positions"] == "prompt"  # the default: each prompt alone


def test_padding_reaches_the_encoder_from_the_config(t5_folder):  # a bad text.padding: tests/config
    with pytest.raises(ConfigError, match="padding 'longest' is not allowed"):
        T5TextEncoder(str(t5_folder), padding="longest")
    encoder = T5TextEncoder.from_config(TextConfig(path=str(t5_folder), padding="max_length"), "cpu")
    assert encoder.padding == "max_length"


def test_padded_build_stores_cosmos_rows_and_records_the_mode(tiny_inputs, tmp_path):
    table, t5 = tiny_inputs
    root = tmp_path / "cache"
    build_quietly(tiny_config(table, root, text_path=t5, overrides=("text.padding=max_length",)))
    assert json.loads((root / "cache_config.json").read_text())["text"]["positions"] == "max_length"
    rows = read_manifest(root)
    for row, expected in zip(rows, cosmos_rows(t5, [row["prompt"] for row in rows])):
        with h5py.File(root / row["shard_path"], "r") as shard:
            assert shard["t5_text_length"][row["cache_row"]] == len(expected)
            stored = shard["t5_text_embeddings"][row["cache_row"]]
        np.testing.assert_array_equal(stored[: len(expected)], expected.astype(stored.dtype))
    # the mode changes the bytes: a resume with the other one is refused, naming the key
    with pytest.raises(LatentforgeError, match="config.text.padding: 'max_length' -> 'none'"):
        check_config(root / "build", resume_key(tiny_config(table, root, text_path=t5)))
    # a deep verify without the build's records takes the mode from cache_config.json
    (root / "build" / "run.json").unlink()
    assert recorded_config(root, Overrides(dataset=(str(table),), device="cpu")).text.padding == "max_length"
