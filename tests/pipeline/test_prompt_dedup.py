"""Identical prompts are encoded once per build, not once per unit: counted at the transformers model itself. A
rank keeps only the rows of prompts that occur in more than one unit."""

from __future__ import annotations

import json
import pickle

import h5py
import numpy as np
import pytest
import transformers

from helpers.builds import read_manifest
from helpers.media import pattern_frames, write_video
from latentforge.builder.run import build
from latentforge.config.loading import load_config
from latentforge.demo.tiny_text_model import make_tiny_t5
from latentforge.executor import local
from latentforge.text.prompt_cache import PromptCache
from latentforge.text.prompt_repeats import DIGEST_BYTES, PromptRepeats
from latentforge.text.t5 import T5TextEncoder

PROMPTS = ["a red ball rolls to the left", "the robot arm picks up a blue cube"]
SAMPLES, UNIT_SIZE, SIZE, FRAMES = 6, 2, 16, 5
WORDS = PROMPTS[1].split()
UNIQUE = [" ".join(WORDS[: k + 1]) for k in range(SAMPLES)]  # six captions, none repeated, every word known


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


def _dataset(tmp_path, captions: list[str]):
    """len(captions) tiny clips, each with its caption, in plan order."""
    dataset = tmp_path / "data"
    (dataset / "videos").mkdir(parents=True)
    (dataset / "metas").mkdir()
    for i, caption in enumerate(captions):
        write_video(dataset / "videos" / f"clip_{i}.mp4", pattern_frames(FRAMES, SIZE, SIZE, seed=i), fps=8)
        (dataset / "metas" / f"clip_{i}.txt").write_text(caption, encoding="utf-8")
    return dataset


def _build(dataset, root, t5_folder):
    """A one-rank build of the dataset in units of 2; its root."""
    config = load_config(extra={
        "dataset": {"reader": "cosmos_dir", "path": [str(dataset)]},
        "frames": {"num_frames": FRAMES, "height": SIZE, "width": SIZE, "resize": "stretch"},
        "tokenizer": {"name": "haar-4x8x8"},
        "text": {"name": "t5", "path": str(t5_folder), "empty_prompt": False},
        "output": {"root": str(root), "unit_size": UNIT_SIZE, "batch_size": 1, "min_free_bytes": 0},
        "run": {"procs": 1, "workers_per_gpu": 0},
    })
    build(config, overwrite=True, quiet=True)
    return root


def _prompt_cache_stats(root) -> dict[str, int]:
    """The one rank's prompt cache at the end of the build, from the run's stats file."""
    [stats_file] = (root / "build").glob("stats-*.json")
    [rank_stats] = json.loads(stats_file.read_text())["ranks"]
    return rank_stats["prompt_cache"]


def test_shared_prompts_are_encoded_once_across_units(tmp_path, t5_folder, forwarded):
    captions = [PROMPTS[i % 2] for i in range(SAMPLES)]  # every unit of 2 holds both
    root = _build(_dataset(tmp_path, captions), tmp_path / "cache", t5_folder)

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
    kept = _prompt_cache_stats(root)  # both prompts occur in every unit: both rows kept
    assert kept["repeated_prompts"] == kept["kept_rows"] == 2 and kept["encoded_prompts"] == 2


def test_a_build_whose_prompts_never_repeat_keeps_no_row_and_writes_the_same_bytes(tmp_path, t5_folder, forwarded,
                                                                                   monkeypatch):
    dataset = _dataset(tmp_path, UNIQUE)
    root = _build(dataset, tmp_path / "unique", t5_folder)
    assert _prompt_cache_stats(root) == {"encoded_prompts": SAMPLES, "kept_rows": 0, "kept_bytes": 0,
                                         "repeated_prompts": 0}
    assert len(forwarded) == SAMPLES == len(set(forwarded))

    # no set handed to the rank: it keeps every row, as before
    monkeypatch.setattr(local, "prompt_repeats", lambda config, units: None)
    every_row = _build(dataset, tmp_path / "every-row", t5_folder)
    assert _prompt_cache_stats(every_row)["kept_rows"] == SAMPLES
    assert (root / "SHA256SUMS").read_text() == (every_row / "SHA256SUMS").read_text()


def test_only_prompts_of_several_units_are_kept_and_each_is_encoded_once(tmp_path, t5_folder, forwarded):
    repeated = PROMPTS[0]
    # units: (repeated, u0) (u1, repeated) (u2, u2): u2 repeats inside one unit only, whose one encode call dedups it
    captions = [repeated, UNIQUE[0], UNIQUE[1], repeated, UNIQUE[2], UNIQUE[2]]
    root = _build(_dataset(tmp_path, captions), tmp_path / "cache", t5_folder)
    assert len(forwarded) == 4 == len(set(forwarded))  # each distinct prompt through the model once
    kept = _prompt_cache_stats(root)
    assert kept["repeated_prompts"] == kept["kept_rows"] == 1 and kept["encoded_prompts"] == 4
    reference = T5TextEncoder(str(t5_folder)).encode([repeated])
    assert kept["kept_bytes"] == int(reference.lengths[0]) * reference.embeddings.shape[2] * 4  # one trimmed row
    assert [row["prompt"] for row in read_manifest(root)] == captions


def test_repeats_are_prompts_of_more_than_one_group_by_eight_byte_digests():
    repeats = PromptRepeats.across([["a", "a", "b"], ["b", "c"], ["d"], ["c"]])
    assert len(repeats) == 2 and "b" in repeats and "c" in repeats
    assert "a" not in repeats and "d" not in repeats and "never seen" not in repeats
    # DIGEST_BYTES (8) per repeated prompt, however long its text, in memory and pickled into every rank's spec
    many = PromptRepeats.across([[f"caption {i} " * 50 for i in range(20_000)]] * 2)
    assert DIGEST_BYTES == 8 and many.nbytes == 8 * len(many) == 8 * 20_000
    assert len(pickle.dumps(many)) < many.nbytes + 512


def test_prompt_cache_keeps_only_rows_of_repeated_prompts(t5_folder, forwarded):
    encoder = T5TextEncoder(str(t5_folder))
    direct = encoder.encode(PROMPTS)
    forwarded.clear()
    cache = PromptCache(encoder, repeats=PromptRepeats.across([[PROMPTS[0]], [PROMPTS[0]]]))
    first = cache.encode([PROMPTS[0], PROMPTS[1], PROMPTS[1]])
    assert cache.kept_rows == 1 and cache.kept_bytes == int(direct.lengths[0]) * encoder.embed_dim * 4
    again = cache.encode([PROMPTS[1], PROMPTS[0]])  # the kept one is not encoded again; the other is
    assert cache.encoded_prompts == 3 and len(forwarded) == 3
    for batch, order in ((first, [0, 1, 1]), (again, [1, 0])):
        _assert_encoder_rows(batch, direct, order)


def _assert_encoder_rows(batch, direct, order):
    """The cache's rows are the encoder's, padded only to the longest of them: the encoder's are zeros past it."""
    width = int(direct.lengths[order].max())
    assert batch.embeddings.shape[1] == width and not direct.embeddings[order][:, width:].any()
    np.testing.assert_array_equal(batch.embeddings, direct.embeddings[order][:, :width])
    np.testing.assert_array_equal(batch.lengths, direct.lengths[order])


def test_prompt_cache_keeps_trimmed_rows_exact_and_re_encodes_after_eviction(t5_folder, forwarded):
    encoder = T5TextEncoder(str(t5_folder))
    direct = encoder.encode(PROMPTS)
    forwarded.clear()
    cache = PromptCache(encoder)
    first = cache.encode([PROMPTS[0], PROMPTS[1], PROMPTS[0]])
    again = cache.encode(PROMPTS)
    assert len(forwarded) == 2 and cache.encoded_prompts == 2
    for batch, order in ((first, [0, 1, 0]), (again, [0, 1])):
        _assert_encoder_rows(batch, direct, order)

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
    assert cache.kept_bytes == sum(row.nbytes for row in rows) and cache.kept_rows == 2
