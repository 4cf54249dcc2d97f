"""Cosmos-Curate's per-window T5 pickles as a build's text source, on a split output folder whose pickles are made
the way Cosmos-Curate makes them (nvidia-cosmos/cosmos-curate at 29f1358b75eab1c5ea7e1e32981747b2a842300f):

- cosmos_curate/models/t5_encoder.py `EncodedSample.truncate` (ModelVariant.T5_XXL, what the split's
  T5StageForSplit loads): the float32 last_hidden_state row, zero past the attention mask, cut to `length` tokens
  and cast to float16;
- cosmos_curate/pipelines/video/read_write/metadata_writer_stage.py `ClipWriterStage._write_per_window_data`:
  `pickle.dump([t5_embeddings[0]], buffer)` written to `<output>/cosmos_predict2_video2world_dataset/t5_xxl/`
  `<clip.uuid>_<window.start_frame>_<window.end_frame>.pickle` (`get_output_path_per_window_t5_embeds`,
  `_get_cosmos_predict_uri`).

The stored rows are checked with h5py against the arrays the files hold."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
from readers.test_cosmos_curate import CLIP_A, CLIP_B, curate_folder

from helpers.builds import read_manifest
from latentforge.builder.run import build
from latentforge.config.loading import load_config
from latentforge.demo.tiny_text_model import make_tiny_t5
from latentforge.errors import ConfigError
from latentforge.text.t5 import T5TextEncoder

T5_DIR = Path("cosmos_predict2_video2world_dataset") / "t5_xxl"
LOOKUP = "<dataset>/cosmos_predict2_video2world_dataset/t5_xxl/<clip-uuid>_<start_frame>_<end_frame>.pickle"


def curate_pickle(root: Path, window: str, n_tokens: int, seed: int, dim: int = 1024) -> np.ndarray:
    """Write a window's pickle as Cosmos-Curate does; returns the array it holds."""
    hidden = np.zeros((512, dim), dtype=np.float32)  # T5Encoder._encode_for_batch: padded to max_length 512
    hidden[:n_tokens] = np.random.default_rng(seed).standard_normal((n_tokens, dim))
    encoded_text = hidden[0:n_tokens].astype(np.float16)  # EncodedSample.truncate, T5_XXL variant
    buffer = io.BytesIO()
    pickle.dump([encoded_text], buffer)
    path = root / T5_DIR / f"{window}.pickle"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return encoded_text


def settings(root: Path, out: Path, **text) -> dict:
    return {"dataset": {"reader": "cosmos_curate", "path": [str(root)]},
            "frames": {"num_frames": 9, "height": 32, "width": 48},
            "tokenizer": {"name": "haar-4x8x8"},
            "text": {"name": "t5", **text},
            "output": {"root": str(out), "rows_per_shard": 4, "min_free_bytes": 0},
            "run": {"workers_per_gpu": 0}}


def shard_rows(out: Path) -> dict[str, tuple[np.ndarray, int]]:
    rows = {}
    for row in read_manifest(out):
        with h5py.File(out / row["shard_path"], "r") as shard:
            rows[row["sample_id"]] = (shard["t5_text_embeddings"][row["cache_row"]],
                                      int(shard["t5_text_length"][row["cache_row"]]))
    return rows


def rejects(out: Path) -> dict[str, dict]:
    return {r["sample_id"]: r for r in map(json.loads, (out / "rejects.jsonl").read_text().splitlines())}


def test_pickles_build_takes_each_windows_pickle_and_rejects_a_window_without_one(tmp_path):
    root, out = curate_folder(tmp_path / "curate"), tmp_path / "cache"
    arrays = {f"{CLIP_A}_0_14": curate_pickle(root, f"{CLIP_A}_0_14", 7, seed=1),
              f"{CLIP_A}_15_29": curate_pickle(root, f"{CLIP_A}_15_29", 512, seed=2)}  # CLIP_B's window has none
    config = load_config(extra=settings(root, out, source="pickles", empty_prompt=False),
                         overrides=["run.max_reject_fraction=1"])
    build(config, overwrite=True, quiet=True)

    rows = shard_rows(out)
    assert sorted(rows) == sorted(arrays)
    for window, array in arrays.items():
        embedding, length = rows[window]
        assert length == array.shape[0] and embedding.shape == (512, 1024)
        np.testing.assert_array_equal(embedding[:length], array)
        assert not embedding[length:].any()
    manifest = {r["sample_id"]: r for r in read_manifest(out)}
    for window in arrays:
        data = (root / T5_DIR / f"{window}.pickle").read_bytes()
        assert manifest[window]["provenance"]["text"] == {
            "source": "pickle", "file": f"{window}.pickle", "sha256": hashlib.sha256(data).hexdigest()}
    missing = rejects(out)[f"{CLIP_B}_0_11"]
    assert (missing["reason"], missing["stage"]) == ("bad_text_pickle", "encode")
    assert f"{T5_DIR / CLIP_B}_0_11.pickle does not exist" in missing["detail"]
    assert "--generate-cosmos-predict-dataset predict2" in missing["detail"]
    text = json.loads((out / "cache_config.json").read_text())["text"]
    assert text["source"] == "pickles" and text["pickles"]["lookup"] == LOOKUP


def test_pickles_plus_encoder_encodes_a_window_without_a_pickle_and_rejects_a_broken_one(tmp_path):
    root, out = curate_folder(tmp_path / "curate"), tmp_path / "cache"
    t5 = make_tiny_t5(tmp_path / "t5", d_model=1024, corpus=["a car leaves the garage", "a parked car"] * 4)
    array = curate_pickle(root, f"{CLIP_A}_0_14", 5, seed=3)
    curate_pickle(root, f"{CLIP_A}_15_29", 5, seed=4, dim=512)  # another encoder's width
    build(load_config(extra=settings(root, out, path=str(t5), source="pickles+encoder"),
                      overrides=["run.max_reject_fraction=1"]), overwrite=True, quiet=True)

    rows = shard_rows(out)
    assert sorted(rows) == sorted([f"{CLIP_A}_0_14", f"{CLIP_B}_0_11"])
    np.testing.assert_array_equal(rows[f"{CLIP_A}_0_14"][0][:5], array)
    expected = T5TextEncoder(str(t5)).encode(["a parked car"])
    embedding, length = rows[f"{CLIP_B}_0_11"]
    assert length == expected.lengths[0]
    np.testing.assert_array_equal(embedding, expected.embeddings[0].astype(np.float16))
    broken = rejects(out)[f"{CLIP_A}_15_29"]
    assert broken["reason"] == "bad_text_pickle" and f"{CLIP_A}_15_29.pickle: array shape (5, 512)" in broken["detail"]


def test_the_enhanced_captions_are_refused_with_pickles(tmp_path):
    keys = settings(tmp_path, tmp_path / "cache", source="pickles", empty_prompt=False)
    keys["dataset"]["caption_source"] = "qwen_enhanced"
    with pytest.raises(ConfigError, match=re.escape("encode the `qwen_caption` captions, not the enhanced ones; "
                                                    "set dataset.caption_source='qwen'")):
        load_config(extra=keys)
    keys["dataset"]["caption_source"] = "qwen"
    assert load_config(extra=keys).dataset.options.caption_source == "qwen"
