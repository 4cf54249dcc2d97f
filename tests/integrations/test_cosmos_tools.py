"""`latentforge cosmos t5` and `cosmos batch-json` through the CLI, checked against Cosmos' contracts."""

from __future__ import annotations

import csv
import json
import pickle

import numpy as np
import pytest

from latentforge.cli.main import main
from latentforge.demo.tiny_text_model import make_tiny_t5
from latentforge.devices import default_device, device_note
from latentforge.integrations.cosmos.t5_pickles import GROOT_PROMPT_PREFIX
from latentforge.text.t5 import T5TextEncoder


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    corpus = ["the robot arm picks up a cube", "a red ball rolls", "place it gently on the plate"]
    return make_tiny_t5(tmp_path_factory.mktemp("t5"), d_model=1024, corpus=corpus)


@pytest.fixture(scope="module")
def encoder(t5_folder):
    return T5TextEncoder(str(t5_folder), padding="max_length")  # as `cosmos t5` runs it by default


def load_like_cosmos(path):
    """cosmos_predict2/data/dataset_video.py: list of length 1, 2-D array, zero-padded to (512, 1024)."""
    with open(path, "rb") as handle:
        value = pickle.load(handle)
    if not (isinstance(value, list) and len(value) == 1 and value[0].ndim == 2 and value[0].dtype == np.float16):
        raise AssertionError(f"{path}: not the Cosmos pickle contract")
    n_tokens = value[0].shape[0]
    embeddings = np.concatenate([value[0], np.zeros((512 - n_tokens, 1024), dtype=np.float32)])
    mask = np.zeros(512, dtype=np.int64)
    mask[:n_tokens] = 1
    return embeddings, mask


def test_cosmos_t5_writes_pickles_for_metas(tmp_path, t5_folder, encoder):
    prompts = {"clip_a": "a red ball rolls", "clip_b": "  the robot arm picks up a cube\n",
               "clip_c": "a red ball rolls"}
    (tmp_path / "metas").mkdir()
    for stem, prompt in prompts.items():
        (tmp_path / "metas" / f"{stem}.txt").write_text(prompt, encoding="utf-8")
    argv = ["cosmos", "t5", str(tmp_path), "--t5", str(t5_folder), "--device", "cpu"]
    assert main(argv) == 0
    written = sorted(p.name for p in (tmp_path / "t5_xxl").iterdir())
    assert written == ["clip_a.pickle", "clip_b.pickle", "clip_c.pickle"]
    for stem, prompt in prompts.items():
        embeddings, mask = load_like_cosmos(tmp_path / "t5_xxl" / f"{stem}.pickle")
        cache_row = encoder.encode([prompt.strip()])  # Cosmos reads metas with .strip()
        assert mask.sum() == cache_row.lengths[0]
        np.testing.assert_array_equal(embeddings, cache_row.embeddings[0].astype(np.float16).astype(np.float32))
    # existing pickles are skipped, never rewritten
    sentinel = tmp_path / "t5_xxl" / "clip_a.pickle"
    sentinel.write_bytes(b"kept")
    assert main(["cosmos", "t5", str(tmp_path), "--t5", str(t5_folder), "--device", "cpu"]) == 0
    assert sentinel.read_bytes() == b"kept"


def test_cosmos_t5_groot_metadata_csv(tmp_path, t5_folder, encoder, capsys):
    rows = [["video_filename", "prompt"], ["gr1/clip_1.mp4", "pick up the cube"], ["clip_2.mp4", "place it, gently"]]
    metadata = tmp_path / "metadata.csv"
    with open(metadata, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(rows)  # quotes the comma row, CRLF lines
    assert '"place it, gently"' in metadata.read_text(encoding="utf-8")
    assert main(["cosmos", "t5", str(tmp_path), "--t5", str(t5_folder), "--metadata-csv", str(metadata)]) == 0
    assert f"encoding prompts {device_note(default_device())}\n" in capsys.readouterr().out  # no --device: auto
    with open(metadata, newline="", encoding="utf-8") as handle:
        parsed = list(csv.reader(handle))[1:]
    expected = {name.rsplit("/", 1)[-1][:-4]: GROOT_PROMPT_PREFIX + prompt for name, prompt in parsed}
    assert sorted(p.name for p in (tmp_path / "metas").iterdir()) == ["clip_1.txt", "clip_2.txt"]
    for stem, prompt in expected.items():
        assert (tmp_path / "metas" / f"{stem}.txt").read_text(encoding="utf-8") == prompt
        embeddings, mask = load_like_cosmos(tmp_path / "t5_xxl" / f"{stem}.pickle")
        cache_row = encoder.encode([prompt])
        assert mask.sum() == cache_row.lengths[0]
        np.testing.assert_array_equal(embeddings, cache_row.embeddings[0].astype(np.float16).astype(np.float32))


def test_cosmos_t5_config_errors(tmp_path, t5_folder):
    (tmp_path / "metas").mkdir()
    assert main(["cosmos", "t5", str(tmp_path), "--t5", str(t5_folder), "--prompt-prefix", "x "]) == 2
    assert main(["cosmos", "t5", str(tmp_path), "--t5", str(t5_folder), "--precision", "fp16"]) == 2
    assert not (tmp_path / "t5_xxl").exists()


def test_batch_json_round_trips(tmp_path):
    inputs = tmp_path / "eval"
    inputs.mkdir()
    for name, prompt in (("b_pick.jpg", "pick the apple\n"), ("a_place.png", "place the cup"), ("c_pour.mp4", "pour")):
        (inputs / name).write_bytes(b"\x00media")
        (inputs / name).with_suffix(".txt").write_text(prompt, encoding="utf-8")
    (inputs / "d_orphan.png").write_bytes(b"\x00")
    (inputs / "notes.md").write_text("not an input", encoding="utf-8")
    out, save_dir = tmp_path / "batch.json", tmp_path / "generated"
    assert main(["cosmos", "batch-json", str(inputs), "--out", str(out), "--save-dir", str(save_dir)]) == 0
    with open(out, encoding="utf-8") as handle:
        entries = json.load(handle)
    assert out.read_text(encoding="utf-8") == json.dumps(entries, indent=4)
    assert [set(e) for e in entries] == [{"input_video", "prompt", "output_video"}] * 3
    assert [e["input_video"] for e in entries] == [str(inputs / n) for n in ("a_place.png", "b_pick.jpg", "c_pour.mp4")]
    assert [e["prompt"] for e in entries] == ["place the cup", "pick the apple", "pour"]
    assert [e["output_video"] for e in entries] == [str(save_dir / f"{s}.mp4") for s in ("a_place", "b_pick", "c_pour")]
    for entry in entries:
        assert (tmp_path / entry["input_video"]).is_file()


def test_batch_json_takes_the_double_dot_prompt_file_as_cosmos_does(tmp_path):
    # prepare_batch_input_json.py: `<stem>.txt`, else `<stem>..txt` (a DreamGen benchmark prompt keeps its full stop)
    inputs = tmp_path / "eval"
    inputs.mkdir()
    files = {"12_pick up bok choy.png": None, "12_pick up bok choy..txt": "Pick up bok choy.",
             "a_both.jpg": None, "a_both.txt": "the plain one", "a_both..txt": "not this one",
             "b_none.png": None}
    for name, text in files.items():
        (inputs / name).write_text(text or "media", encoding="utf-8")
    out = tmp_path / "batch.json"
    assert main(["cosmos", "batch-json", str(inputs), "--out", str(out), "--save-dir", "gen"]) == 0
    entries = json.loads(out.read_text(encoding="utf-8"))
    assert [(e["input_video"], e["prompt"], e["output_video"]) for e in entries] == [
        (str(inputs / "12_pick up bok choy.png"), "Pick up bok choy.", "gen/12_pick up bok choy.mp4"),
        (str(inputs / "a_both.jpg"), "the plain one", "gen/a_both.mp4"),
    ]
