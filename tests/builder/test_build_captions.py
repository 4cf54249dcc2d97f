"""captions.mode: a build of clips without captions writes them with a tiny real-architecture Qwen2.5-VL (loaded
through the qwen2.5-vl backend) and embeds them with the tiny T5; cache_config.json records how; the captions are
recorded, so a rerun and an --extend generate none again (counted on the generate call), and a rerun with another
prompt is refused; a folder of another architecture is refused before
anything is written; an empty answer is asked again with the fallback, then rejected; mode keep changes no byte."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil

import h5py
import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, T5EncoderModel

from helpers.builds import read_manifest, tiny_t5
from helpers.exec_world import build_args, sums
from helpers.media import pattern_frames, write_video
from helpers.tiny_vlm import DECODED, make_tiny_qwen_vl
from latentforge.captions.base import Generation
from latentforge.captions.qwen_vl import QwenVLCaptioner
from latentforge.captions.templates import TEMPLATES

KNOWN = "clip number 2"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("captions")
    (folder / "videos").mkdir()
    rows = []
    for i in range(4):
        write_video(folder / "videos" / f"clip{i:03d}.mp4", pattern_frames(9, 64, 48, seed=i))
        rows.append({"id": f"clip{i:03d}", "video": f"videos/clip{i:03d}.mp4", "caption": KNOWN if i == 2 else ""})
    t5 = tiny_t5(folder / "t5", [{"caption": DECODED}, {"caption": KNOWN}], d_model=64)
    return folder, rows, t5, make_tiny_qwen_vl(folder / "qwen")


def _table(folder, rows, name="samples.csv"):
    path = folder / name
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "video", "caption"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def _args(table, root, t5, *extra):
    return build_args(table, root, "--text", "t5", "--text-path", str(t5), "--set", "captions.frames=2",
                      "--set", "captions.resolution=56", "--set", "captions.max_new_tokens=16",
                      "--set", "captions.batch_size=2", *extra, width=64, height=48)


@pytest.fixture
def generate_calls(monkeypatch):
    """Every window the captioner is asked about, by call: the real generate runs."""
    calls: list[int] = []
    real = QwenVLCaptioner.generate

    def counted(self, windows, prompt, max_new_tokens):
        calls.append(len(windows))
        return real(self, windows, prompt, max_new_tokens)

    monkeypatch.setattr(QwenVLCaptioner, "generate", counted)
    return calls


def test_missing_captions_are_generated_embedded_recorded_and_never_generated_again(world, cli, generate_calls):
    folder, rows, t5, qwen = world
    table, root = _table(folder, rows[:3]), folder / "cache"
    args = _args(table, root, t5, "--set", "captions.mode=generate_missing", "--set", f"captions.model={qwen}")
    done = cli(args)
    assert done.returncode == 0, done.stderr
    assert generate_calls == [2]  # clip000 and clip001 in one batch; clip002 has its caption
    manifest = {row["sample_id"]: row for row in read_manifest(root)}
    assert {k: row["prompt"] for k, row in manifest.items()} == {"clip000": DECODED, "clip001": DECODED,
                                                                 "clip002": KNOWN}
    caption = manifest["clip000"]["provenance"]["caption"]
    assert caption["generated"] is True and caption["prompt"] == "detailed"
    assert caption["model_sha256"] == QwenVLCaptioner.checkpoint_digest(str(qwen))
    assert caption["frame_indices"] == [0, 8] and "caption" not in manifest["clip002"]["provenance"]

    # the caption's text row is the tiny T5's last hidden state of it (transformers, called directly)
    tokenizer, model = AutoTokenizer.from_pretrained(t5), T5EncoderModel.from_pretrained(t5).eval()
    ids = tokenizer(DECODED, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        expected = model(input_ids=ids).last_hidden_state[0].numpy()
    row = manifest["clip000"]
    with h5py.File(root / row["shard_path"]) as shard:
        length = int(shard["t5_text_length"][row["cache_row"]])
        stored = shard["t5_text_embeddings"][row["cache_row"]]
    assert length == ids.shape[1]
    np.testing.assert_allclose(stored[:length].astype(np.float32), expected, rtol=2e-3, atol=2e-3)
    assert not stored[length:].any()

    # cache_config.json says how the captions were made
    recorded = json.loads((root / "cache_config.json").read_text(encoding="utf-8"))["captions"]
    detailed = TEMPLATES["detailed"]
    assert recorded == {
        "mode": "generate_missing", "captioner": "qwen2.5-vl", "model_sha256": caption["model_sha256"], "frames": 2,
        "resolution": 56,
        "prompt": {"name": "detailed", "sha256": hashlib.sha256(detailed.encode()).hexdigest(), "text": detailed},
        "fallback_prompt": {"name": "short", "sha256": hashlib.sha256(TEMPLATES["short"].encode()).hexdigest(),
                            "text": TEMPLATES["short"]},
        "decoding": {"strategy": "greedy", "num_beams": 1, "max_new_tokens": 16, "fallback_max_new_tokens": 32,
                     "batch_size": 2}}

    # a rerun reads every caption back; another prompt is refused, as any changed setting; --extend generates only
    # the new clip's
    assert cli(args).returncode == 0 and generate_calls == [2]
    refused = cli([*args, "--set", "captions.prompt=short"])
    assert refused.returncode == 1 and "config.captions.prompt: 'detailed' -> 'short'" in refused.stderr
    grown = _table(folder, rows, "grown.csv")
    extend = _args(grown, root, t5, "--set", "captions.mode=generate_missing", "--set", f"captions.model={qwen}",
                   "--extend")
    done = cli(extend)
    assert done.returncode == 0, done.stderr
    assert generate_calls == [2, 1]
    assert {row["sample_id"]: row["prompt"] for row in read_manifest(root)}["clip003"] == DECODED


def test_a_folder_of_another_architecture_is_refused_before_anything_is_written(world, cli, tmp_path):
    folder, rows, t5, qwen = world
    other = tmp_path / "not-a-vlm"
    shutil.copytree(qwen, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "qwen2",
                                                   "architectures": ["Qwen2ForCausalLM"]}))
    root = tmp_path / "cache"
    done = cli(_args(_table(folder, rows, "refused.csv"), root, t5, "--set", "captions.mode=generate_missing",
                     "--set", f"captions.model={other}"))
    assert done.returncode == 2
    assert "holds a 'qwen2' model (Qwen2ForCausalLM), not a Qwen2.5-VL-class model" in done.stderr
    assert not root.exists() or not any(root.iterdir())


def test_an_empty_answer_is_asked_again_with_the_fallback_then_rejected(world, cli, tmp_path, monkeypatch):
    folder, rows, t5, qwen = world
    asked: list[tuple[str, int, int]] = []

    def empty(self, windows, prompt, max_new_tokens):
        asked.append((prompt, max_new_tokens, len(windows)))
        return [Generation("", True) for _ in windows]

    monkeypatch.setattr(QwenVLCaptioner, "generate", empty)
    root = tmp_path / "cache"
    done = cli(_args(_table(folder, rows[:3], "failing.csv"), root, t5, "--set", "captions.mode=generate_missing",
                     "--set", f"captions.model={qwen}", "--max-reject-fraction", "1"))
    assert done.returncode == 0, done.stderr
    assert asked == [(TEMPLATES["detailed"], 16, 2), (TEMPLATES["short"], 32, 2)]
    rejects = [json.loads(line) for line in (root / "rejects.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["reason"]) for r in rejects] == [("clip000", "caption_failed"),
                                                                ("clip001", "caption_failed")]
    assert "empty with the 'detailed' prompt, then empty with the 'short' prompt" in rejects[0]["detail"]
    assert [row["sample_id"] for row in read_manifest(root)] == ["clip002"]


def test_out_of_memory_lowers_the_batch_says_so_and_every_window_is_captioned(world, cli, tmp_path, monkeypatch):
    folder, rows, t5, qwen = world
    real, asked = QwenVLCaptioner.generate, []

    def one_fits(self, windows, prompt, max_new_tokens):
        asked.append(len(windows))
        if len(windows) > 1:  # this GPU holds one window's generation at a time
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(self, windows, prompt, max_new_tokens)

    monkeypatch.setattr(QwenVLCaptioner, "generate", one_fits)
    root = tmp_path / "cache"
    done = cli(_args(_table(folder, rows[:3], "tight.csv"), root, t5, "--set", "captions.mode=generate_missing",
                     "--set", f"captions.model={qwen}"))
    assert done.returncode == 0, done.stderr
    assert asked == [2, 1, 1]
    assert "ran out of GPU memory on 2 windows at once; captioning 1 at a time" in done.stderr
    manifest = {row["sample_id"]: row["prompt"] for row in read_manifest(root)}
    assert manifest == {"clip000": DECODED, "clip001": DECODED, "clip002": KNOWN}


def test_mode_keep_changes_no_byte(world, cli, tmp_path):
    folder, rows, t5, qwen = world
    table = _table(folder, rows[2:3], "kept.csv")
    plain, kept = tmp_path / "plain", tmp_path / "kept"
    assert cli(build_args(table, plain, width=64, height=48)).returncode == 0
    assert cli(build_args(table, kept, "--set", "captions.mode=keep", "--set", "captions.frames=3",
                          width=64, height=48)).returncode == 0
    assert sums(plain) == sums(kept)
    assert (plain / "build" / "run.json").read_bytes() == (kept / "build" / "run.json").read_bytes()
