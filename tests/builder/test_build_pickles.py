"""Cosmos T5 pickles as a build's text source (text.source), checked with pickle/numpy/h5py/hashlib and
against rows of the same tiny T5 run through transformers by `latentforge cosmos t5` and by an encoder build."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import pickle
import re

import h5py
import numpy as np
import pytest
import transformers

from helpers.builds import read_manifest
from helpers.media import pattern_frames, write_video
from latentforge.builder.run import build
from latentforge.cli.main import main
from latentforge.config.loading import load_config
from latentforge.demo.tiny_text_model import make_tiny_t5
from latentforge.errors import ConfigError
from latentforge.text.t5 import T5TextEncoder

CAPTIONS = {"clip_a": "a red ball rolls to the left", "clip_b": "the robot arm picks up a blue cube",
            "clip_c": "two boxes slide across a table", "clip_d": "a red ball rolls to the left",
            "clip_e": "a green square moves up"}
SIZE, FRAMES = 16, 5


def make_cosmos_dir(folder):
    (folder / "videos").mkdir(parents=True)
    (folder / "metas").mkdir()
    for i, (stem, caption) in enumerate(CAPTIONS.items()):
        write_video(folder / "videos" / f"{stem}.mp4", pattern_frames(FRAMES, SIZE, SIZE, seed=i), fps=8)
        (folder / "metas" / f"{stem}.txt").write_text(caption + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    return make_tiny_t5(tmp_path_factory.mktemp("t5"), d_model=1024, corpus=list(CAPTIONS.values()) * 4)


def cosmos_array(n_tokens, seed, dim=1024):
    """What Cosmos' get_t5_embeddings writes: a float16 (n_tokens, dim) array."""
    return np.random.default_rng(seed).standard_normal((n_tokens, dim)).astype(np.float16)


def dump(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        pickle.dump(value, handle)  # the plain pickle module, as Cosmos' script


class CreatesMarker:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def extra(dataset, root, **text):
    return {
        "dataset": {"reader": "cosmos_dir", "path": [str(dataset)]},
        "frames": {"num_frames": FRAMES, "height": SIZE, "width": SIZE, "resize": "stretch"},
        "tokenizer": {"name": "haar-4x8x8"},
        "text": {"name": "t5", **text},
        "output": {"root": str(root), "unit_size": 2, "batch_size": 2, "min_free_bytes": 0},
        "run": {"workers_per_gpu": 0},
    }


def shard_rows(root):
    """{sample_id: (embedding row, length)} read with h5py through manifest.jsonl."""
    rows = {}
    for row in read_manifest(root):
        with h5py.File(root / row["shard_path"], "r") as shard:
            rows[row["sample_id"]] = (shard["t5_text_embeddings"][row["cache_row"]],
                                      int(shard["t5_text_length"][row["cache_row"]]))
    return rows


def read_rejects(root):
    return {r["sample_id"]: r for r in map(json.loads, (root / "rejects.jsonl").read_text().splitlines())}


def test_pickles_only_build_takes_pickle_rows_and_rejects_bad_pickles(tmp_path):
    dataset = make_cosmos_dir(tmp_path / "data")
    arrays = {"clip_a": cosmos_array(7, 1), "clip_b": cosmos_array(512, 2)}
    for stem, array in arrays.items():
        dump(dataset / "t5_xxl" / f"{stem}.pickle", [array])
    marker = tmp_path / "pwned"
    dump(dataset / "t5_xxl" / "clip_c.pickle", [CreatesMarker(marker)])
    dump(dataset / "t5_xxl" / "clip_e.pickle", [cosmos_array(4, 3, dim=512)])  # another encoder's width
    root = tmp_path / "cache"  # clip_d has no pickle

    code = main(["build", "--dataset", str(dataset), "--out", str(root), "--tokenizer", "haar-4x8x8",
                 "--text", "t5", "--text-source", "pickles", "--no-empty-prompt", "--quiet",
                 "--max-reject-fraction", "1",  # three of five samples carry a bad pickle
                 "--set", f"frames.num_frames={FRAMES}", "--set", f"frames.height={SIZE}",
                 "--set", f"frames.width={SIZE}", "--set", "frames.resize=stretch",
                 "--set", "output.min_free_bytes=0", "--set", "run.workers_per_gpu=0"])
    assert code == 0
    assert not marker.exists()
    rejects = read_rejects(root)
    assert {k: (r["reason"], r["stage"]) for k, r in rejects.items()} == {
        f"videos/{s}": ("bad_text_pickle", "encode") for s in ("clip_c", "clip_d", "clip_e")}
    assert "posix.system" in rejects["videos/clip_c"]["detail"] or "os.system" in rejects["videos/clip_c"]["detail"]
    assert "clip_c.pickle" in rejects["videos/clip_c"]["detail"]
    assert "clip_d.pickle does not exist" in rejects["videos/clip_d"]["detail"]
    assert "clip_e.pickle" in rejects["videos/clip_e"]["detail"]

    rows = shard_rows(root)
    assert sorted(rows) == ["videos/clip_a", "videos/clip_b"]
    for stem, array in arrays.items():
        embedding, length = rows[f"videos/{stem}"]
        assert length == array.shape[0]
        assert embedding.shape == (512, 1024) and embedding.dtype == np.float16
        np.testing.assert_array_equal(embedding[:length], array)
        assert not embedding[length:].any()  # padded with exact zeros
    manifest = {r["sample_id"]: r for r in read_manifest(root)}
    for stem in arrays:
        pickle_bytes = (dataset / "t5_xxl" / f"{stem}.pickle").read_bytes()
        assert manifest[f"videos/{stem}"]["provenance"]["text"] == {
            "source": "pickle", "file": f"{stem}.pickle", "sha256": hashlib.sha256(pickle_bytes).hexdigest()}
    text = json.loads((root / "cache_config.json").read_text())["text"]
    assert text["source"] == "pickles" and text["empty_prompt"] is False and text["dim"] == 1024
    assert text["pickles"]["lookup"] == "<dataset>/t5_xxl/<stem>.pickle"
    assert "weights_sha256" not in text  # no encoder took part
    assert not (root / "empty_prompt.h5").exists()


def test_pickles_from_cosmos_t5_give_the_encoder_build_rows(tmp_path, t5_folder, monkeypatch):
    dataset = make_cosmos_dir(tmp_path / "data")
    # cosmos t5 pads to max_length by default, as Cosmos' script; a build with text.padding=max_length makes the
    # same call, so its rows are the pickles' bits
    assert main(["cosmos", "t5", str(dataset), "--t5", str(t5_folder), "--device", "cpu"]) == 0
    encoder_root, pickles_root = tmp_path / "by_encoder", tmp_path / "by_pickles"
    build(load_config(extra=extra(dataset, encoder_root, path=str(t5_folder), padding="max_length")),
          overwrite=True, quiet=True)

    forwarded = []
    original = transformers.T5EncoderModel.forward

    def counting_forward(self, input_ids=None, **kwargs):
        forwarded.append(input_ids.shape[0])
        return original(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(transformers.T5EncoderModel, "forward", counting_forward)
    config = load_config(extra=extra(dataset, pickles_root, path=str(t5_folder), source="pickles",
                                     padding="max_length"))
    build(config, overwrite=True, quiet=True)
    assert forwarded == [1]  # the units ran no encoder; the commit encoded the empty prompt only

    by_encoder, by_pickles = shard_rows(encoder_root), shard_rows(pickles_root)
    assert sorted(by_pickles) == sorted(by_encoder) == [f"videos/{s}" for s in CAPTIONS]
    for sample_id, (embedding, length) in by_encoder.items():
        assert by_pickles[sample_id][1] == length
        np.testing.assert_array_equal(by_pickles[sample_id][0], embedding)
    with h5py.File(encoder_root / "empty_prompt.h5") as a, h5py.File(pickles_root / "empty_prompt.h5") as b:
        np.testing.assert_array_equal(a["t5_text_embeddings"][()], b["t5_text_embeddings"][()])
    encoder_text = json.loads((encoder_root / "cache_config.json").read_text())["text"]
    pickles_text = json.loads((pickles_root / "cache_config.json").read_text())["text"]
    assert encoder_text["source"] == "encoder" and pickles_text["source"] == "pickles"
    assert pickles_text["weights_sha256"] == encoder_text["weights_sha256"]  # the empty prompt's encoder
    assert all("text" not in r["provenance"] for r in read_manifest(encoder_root))
    assert {r["provenance"]["text"]["source"] for r in read_manifest(pickles_root)} == {"pickle"}


def test_table_pickle_column_with_encoder_fallback(tmp_path, t5_folder):
    dataset = make_cosmos_dir(tmp_path / "data")
    arrays = {"clip_a": cosmos_array(5, 4), "clip_c": cosmos_array(9, 5)}
    for stem, array in arrays.items():
        dump(tmp_path / "data" / "emb" / f"{stem}.pkl", [array])
    with open(tmp_path / "data" / "list.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["video", "caption", "t5"])
        for stem, caption in CAPTIONS.items():
            writer.writerow([f"videos/{stem}.mp4", caption, f"emb/{stem}.pkl" if stem in arrays else ""])
    root = tmp_path / "cache"
    settings = extra(dataset, root, path=str(t5_folder), source="pickles+encoder")
    settings["dataset"] = {"reader": "table", "path": [str(dataset / "list.csv")], "t5_pickle_column": "t5"}
    build(load_config(extra=settings), overwrite=True, quiet=True)

    rows = shard_rows(root)
    manifest = {r["sample_id"]: r for r in read_manifest(root)}
    reference = T5TextEncoder(str(t5_folder))
    for stem, caption in CAPTIONS.items():
        embedding, length = rows[f"videos/{stem}"]
        origin = manifest[f"videos/{stem}"]["provenance"]["text"]
        if stem in arrays:
            assert origin["source"] == "pickle" and origin["file"] == f"{stem}.pkl"
            assert "unknown_token_fraction" not in manifest[f"videos/{stem}"]  # not the encoder's tokens
            assert length == arrays[stem].shape[0]
            np.testing.assert_array_equal(embedding[:length], arrays[stem])
        else:
            assert origin == {"source": "encoder"} and manifest[f"videos/{stem}"]["unknown_token_fraction"] == 0.0
            expected = reference.encode([caption])
            assert length == expected.lengths[0]
            np.testing.assert_array_equal(embedding, expected.embeddings[0].astype(np.float16))
        assert not embedding[length:].any()
    assert (root / "empty_prompt.h5").exists()
    text = json.loads((root / "cache_config.json").read_text())["text"]
    assert text["source"] == "pickles+encoder" and text["pickles"]["lookup"] == "table column 't5'"


@pytest.mark.parametrize("overrides, message", [
    (["text.source=pickles"], "empty_prompt.h5 still needs the T5 encoder"),
    (["text.source=pickles", "text.name=umt5", "text.empty_prompt=false"], "set text.name=t5"),
    (["text.source=pickles+encoder"], "text.path is empty"),
    (["text.source=files"], "allowed: encoder, pickles, pickles+encoder"),
    (["dataset.t5_pickle_column=t5", "dataset.reader=table"], "text.source=encoder reads no pickles"),
    (["dataset.t5_pickle_column=t5", "text.source=pickles", "text.empty_prompt=false"],
     "is a setting of reader table, not of dataset.reader='cosmos_dir'"),
    (["dataset.reader=table", "text.source=pickles", "text.empty_prompt=false"], "needs dataset.t5_pickle_column"),
])
def test_config_errors_before_any_model_load(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(extra=extra(tmp_path, tmp_path / "cache"), overrides=overrides)


def test_cli_refuses_pickles_without_empty_prompt_encoder(tmp_path, capsys):
    code = main(["build", "--dataset", str(tmp_path), "--out", str(tmp_path / "cache"), "--text", "t5",
                 "--text-source", "pickles", "--tokenizer", "haar-4x8x8"])
    assert code == 2
    assert "--no-empty-prompt" in capsys.readouterr().err
