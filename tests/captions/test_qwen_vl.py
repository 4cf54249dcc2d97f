"""The qwen2.5-vl captioner on a tiny real-architecture Qwen2.5-VL saved by transformers and loaded through the
backend: greedy answers equal transformers' own generate on the same inputs, a cut-off answer is marked, the
pre-flight refuses another architecture naming it and a weights digest that differs from the pin."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from helpers.tiny_vlm import DECODED, make_tiny_qwen_vl
from latentforge import registry
from latentforge.captions.qwen_vl import QwenVLCaptioner
from latentforge.captions.templates import TEMPLATES, resolve_prompt
from latentforge.config import CaptionsConfig
from latentforge.errors import ConfigError
from latentforge.pipeline.window_frames import sampled_indices


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_qwen_vl(tmp_path_factory.mktemp("vlm") / "qwen")


def _windows(count: int = 2) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.integers(0, 256, (3, 48, 64, 3), dtype=np.uint8) for _ in range(count)]


def test_it_is_the_registered_captioner_and_answers_greedily(folder):
    assert registry.resolve("captioner", "qwen2.5-vl") is QwenVLCaptioner
    captioner = QwenVLCaptioner.load(CaptionsConfig(mode="generate_missing", model=str(folder)), "cpu")
    answers = captioner.generate(_windows(), TEMPLATES["short"], max_new_tokens=16)
    assert [(a.text, a.ended) for a in answers] == [(DECODED, True)] * 2
    cut = captioner.generate(_windows(1), TEMPLATES["short"], max_new_tokens=3)
    assert cut[0].text == "a red ball" and not cut[0].ended and not cut[0].usable


def test_the_answer_is_transformers_own_greedy_generate(folder):
    """The reference: transformers' classes called directly with the processor's steps, greedy."""
    from transformers import AutoImageProcessor, AutoTokenizer, Qwen2_5_VLForConditionalGeneration

    window = _windows(1)[0]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    processor = AutoImageProcessor.from_pretrained(folder)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(folder).eval()
    pixels = processor(images=list(window), return_tensors="pt")
    chat = tokenizer.apply_chat_template([{"role": "user", "content": [{"type": "image"}] * 3 + [
        {"type": "text", "text": "describe"}]}], tokenize=False, add_generation_prompt=True)
    per_image = int(pixels["image_grid_thw"][0].prod()) // 4
    chat = chat.replace("<|image_pad|>", "<|image_pad|>" * per_image)
    ids = tokenizer(chat, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        out = model.generate(input_ids=ids, pixel_values=pixels["pixel_values"],
                             image_grid_thw=pixels["image_grid_thw"], do_sample=False,
                             mm_token_type_ids=(ids == model.config.image_token_id).int(),
                             max_new_tokens=16)
    expected = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True).strip()
    captioner = QwenVLCaptioner.load(CaptionsConfig(mode="generate_all", model=str(folder)), "cpu")
    assert captioner.generate([window], "describe", 16)[0].text == expected == DECODED


def test_preflight_refuses_another_architecture_naming_it(folder, tmp_path):
    other = tmp_path / "t5"
    shutil.copytree(folder, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "t5",
                                                   "architectures": ["T5EncoderModel"]}))
    with pytest.raises(ConfigError, match=r"holds a 't5' model \(T5EncoderModel\), not a Qwen2.5-VL-class model"):
        QwenVLCaptioner.preflight(CaptionsConfig(mode="generate_missing", model=str(other)))


def test_preflight_checks_the_pinned_digest(folder):
    digest = QwenVLCaptioner.checkpoint_digest(str(folder))
    QwenVLCaptioner.preflight(CaptionsConfig(mode="generate_missing", model=str(folder), sha256=digest))
    with pytest.raises(ConfigError, match="captions.sha256 pins 0+"):
        QwenVLCaptioner.preflight(CaptionsConfig(mode="generate_missing", model=str(folder), sha256="0" * 64))


def test_frames_are_spread_evenly_over_the_window_and_prompts_resolve(tmp_path):
    assert sampled_indices(list(range(10, 19)), 3) == [10, 14, 18]
    assert sampled_indices(list(range(9)), 1) == [4]
    assert sampled_indices([2, 3], 8) == [2, 3]
    assert sampled_indices(list(range(93)), 8) == [0, 13, 26, 39, 53, 66, 79, 92]
    (tmp_path / "mine.txt").write_text("  say what moves  \n")
    assert (resolve_prompt(str(tmp_path / "mine.txt")).name, resolve_prompt(str(tmp_path / "mine.txt")).text) == \
        ("mine.txt", "say what moves")
    assert resolve_prompt("cosmos").text == TEMPLATES["cosmos"]
