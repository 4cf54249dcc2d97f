"""Identical prompts are encoded once per build, not once per unit: counted at the transformers model itself."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import transformers

from helpers.builds import read_manifest
from helpers.media import pattern_frames, write_video
from latentforge.builder.run import build
from latentforge.config.loading import load_config
from latentforge.demo.tiny_text_model import make_tiny_t5
from latentforge.text.prompt_cache import PromptCache
from latentforge.text.t5 import T5TextEncoder

PROMPTS = ["a red ball rolls to the left", "the robot arm picks up a blue cube"]
SAMPLES, UNIT_SIZE, SIZE, FRAMES = 6, 2, 16, 5


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    return make_tiny_t5(tmp_path_factory.mktemp("t5"), d_model=64, corpus=PROMPTS * 4)


@pytest.fixture
def forwarded(monkeypatch):
    """Every input_ids row that reaches T5EncoderModel.forward, as a tuple of token ids."""
    rows: list[tuple[int, ...]] = []
    original = transformers.T5EncoderModel.forward

    def counting_forward(self, input_ids=None, **kwargs):
        rows.extend(tuple(r) for r in input_ids.tolist())
        return original(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(transformers.T5EncoderModel, "forward", counting_forward)
    return rows


def test_shared_prompts_are_encoded_once_across_units(tmp_path, t5_folder, forwarded):
    dataset = tmp_path / "data"
    (dataset / "videos").mkdir(parents=True)
    (dataset / "metas").mkdir()
    for i in range(SAMPLES):  # prompts alternate, so every unit of 2 holds both
        write_video(dataset / "videos" / f"clip_{i}.mp4", pattern_frames(FRAMES, SIZE, SIZE, seed=i), fps=8)
        (dataset / "metas" / f"clip_{i}.txt").write_text(PROMPTS[i % 2], encoding="utf-8")
    root = tmp_path / "cache"
    config = load_config(extra={
        "dataset": {"reader": "cosmos_dir", "path": [str(dataset)]},
        "frames": {"num_frames": FRAMES, "height": SIZE, "width": SIZE, "resize": "stretch"},
        "tokenizer": {"name": "haar-4x8x8"},
        "text": {"name": "t5", "path": str(t5_folder), "empty_prompt": False},
        "output": {"root": str(root), "unit_size": UNIT_SIZE, "batch_size": 1, "min_free_bytes": 0},
        "run": {"procs": 1, "workers_per_gpu": 0},
    })
    build(config, overwrite=True, quiet=True)

    manifest = read_manifest(root)
    assert len(manifest) == SAMPLES and len({r["unit"] for r in manifest}) == SAMPLES // UNIT_SIZE
    assert len(forwarded) == len(PROMPTS) == len(set(forwarded))  # K prompts, each through the model once

    reference = T5TextEncoder(str(t5_folder)).encode(PROMPTS)
    for row in manifest:
        with h5py.File(root / row["shard_path"], "r") as shard:
            embedding = shard["t5_text_embeddings"][row["cache_row"]]
            length = shard["t5_text_length"][row["cache_row"]]
        k = PROMPTS.index(row["prompt"])
        assert length == reference.lengths[k]
        np.testing.assert_array_equal(embedding, reference.embeddings[k].astype(np.float16))


def test_prompt_cache_keeps_trimmed_rows_exact_and_re_encodes_after_eviction(t5_folder, forwarded):
    encoder = T5TextEncoder(str(t5_folder))
    direct = encoder.encode(PROMPTS)
    forwarded.clear()
    cache = PromptCache(encoder)
    first = cache.encode([PROMPTS[0], PROMPTS[1], PROMPTS[0]])
    again = cache.encode(PROMPTS)
    assert len(forwarded) == 2 and cache.encoded_prompts == 2
    for batch, order in ((first, [0, 1, 0]), (again, [0, 1])):
        np.testing.assert_array_equal(batch.embeddings, direct.embeddings[order])
        np.testing.assert_array_equal(batch.lengths, direct.lengths[order])

    one_row = int(direct.lengths.max()) * encoder.embed_dim * 4
    small = PromptCache(encoder, capacity_bytes=one_row)  # room for one trimmed row
    small.encode([PROMPTS[0]])
    small.encode([PROMPTS[1]])
    small.encode([PROMPTS[0]])  # evicted by the second prompt: encoded again
    assert small.encoded_prompts == 3


def test_cached_rows_hold_only_their_own_tokens_not_the_padded_batch(t5_folder):
    """The budget counts trimmed rows, so a cached row must not keep the encoder's whole [B, 512, D] batch
    alive through a view (it did: a long build grew by every unit's padded text batch)."""
    cache = PromptCache(T5TextEncoder(str(t5_folder)))
    cache.encode(PROMPTS)
    rows = [row for row, _ in cache._rows.values()]
    assert len(rows) == 2 and all(row.base is None for row in rows)
    assert cache._bytes == sum(row.nbytes for row in rows)
