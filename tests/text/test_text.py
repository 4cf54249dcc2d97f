"""t5 / umt5 backends against plain transformers calls on tiny real-architecture models made here."""

from __future__ import annotations

import hashlib
import subprocess

import numpy as np
import pytest
import torch
import transformers

from latentforge import registry
from latentforge.cache.layout import text_datasets
from latentforge.config import TextConfig
from latentforge.config.loading import load_config
from latentforge.demo.tiny_text_model import make_tiny_t5, make_tiny_umt5
from latentforge.errors import ConfigError
from latentforge.text.t5 import T5TextEncoder
from latentforge.text.umt5 import UMT5TextEncoder

CORPUS = ["a red ball rolls to the left", "the robot arm picks up a blue cube", "two boxes slide on a table"]
PROMPTS = ["a red ball rolls", "the robot arm picks up a cube", "", "boxes slide left " * 200]


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    return make_tiny_t5(tmp_path_factory.mktemp("t5"), d_model=1024, corpus=CORPUS)


@pytest.fixture(scope="module")
def umt5_folder(tmp_path_factory):
    return make_tiny_umt5(tmp_path_factory.mktemp("umt5"), d_model=4096, corpus=CORPUS)


def transformers_reference(folder, model_class, prompts, dtype=torch.float32, tokenizer_class="AutoTokenizer"):
    """What Cosmos' encode_prompts computes, written with plain transformers calls."""
    tokenizer = getattr(transformers, tokenizer_class).from_pretrained(folder)
    model = getattr(transformers, model_class).from_pretrained(folder, dtype=dtype).eval()
    tokens = tokenizer(prompts, padding="max_length", max_length=512, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**tokens).last_hidden_state.float().numpy()
    lengths = tokens["attention_mask"].sum(dim=1).numpy()
    untruncated = [len(ids) for ids in tokenizer(prompts)["input_ids"]]
    return hidden, lengths, np.array(untruncated) > 512


def check_rows_against_reference(batch, hidden, lengths, atol, rel_l2=None):
    np.testing.assert_array_equal(batch.lengths, lengths)
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(batch.embeddings[i, :n], hidden[i, :n], rtol=0, atol=atol)
        if rel_l2 is not None:  # each prompt alone at its own length vs Cosmos' padded, masked call
            ours, padded = batch.embeddings[i, :n].astype(np.float64), hidden[i, :n].astype(np.float64)
            assert np.linalg.norm(ours - padded) <= rel_l2 * np.linalg.norm(padded)
        # transformers itself leaves non-zero states on pad positions; ours must be exactly 0
        if n < hidden.shape[1]:
            assert np.abs(hidden[i, n:]).max() > 0
        assert not batch.embeddings[i, n:].any()


@pytest.mark.parametrize(
    "encoder_class, model_class, folder_fixture, dim",
    [(T5TextEncoder, "T5EncoderModel", "t5_folder", 1024), (UMT5TextEncoder, "UMT5EncoderModel", "umt5_folder", 4096)],
)
def test_rows_equal_transformers_output(request, encoder_class, model_class, folder_fixture, dim):
    folder = request.getfixturevalue(folder_fixture)
    encoder = encoder_class(str(folder))
    batch = encoder.encode(PROMPTS)
    hidden, lengths, truncated = transformers_reference(folder, model_class, PROMPTS)
    assert batch.embeddings.shape == (len(PROMPTS), 512, dim) and batch.embeddings.dtype == np.float32
    assert encoder.embed_dim == dim
    # float32 rounding only: the prompt alone and padded to 512 take other matmul shapes (measured up to 1.1e-6 on
    # an AVX2 CPU at width 4096); 2^-18 is 32 float32 steps
    check_rows_against_reference(batch, hidden, lengths, atol=1e-4, rel_l2=2.0**-18)
    assert lengths[2] == 1  # the empty prompt is just </s>
    assert lengths[3] == 512
    np.testing.assert_array_equal(batch.truncated, truncated)
    assert batch.truncated.tolist() == [False, False, False, True]


def test_umt5_spiece_only_folder(tmp_path):
    """The google/umt5-xxl layout ships spiece.model and no tokenizer.json."""
    import sentencepiece  # package dependencies: google/umt5-xxl folders need them
    folder = make_tiny_umt5(tmp_path, d_model=256, corpus=CORPUS, spiece=True)
    assert not (folder / "tokenizer.json").exists()
    prompts = PROMPTS[:3]
    batch = UMT5TextEncoder(str(folder)).encode(prompts)
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(folder / "spiece.model")).encode(prompts)
    np.testing.assert_array_equal(batch.lengths, [len(p) + 1 for p in pieces])  # + </s>
    # transformers 5's AutoTokenizer maps umt5 to a backend that cannot read spiece.model; name the class
    hidden, lengths, _ = transformers_reference(folder, "UMT5EncoderModel", prompts, tokenizer_class="T5Tokenizer")
    check_rows_against_reference(batch, hidden, lengths, atol=1e-4)


def test_bf16_rows_equal_transformers_bf16(t5_folder):
    """bf16 rounds differently over 8 positions than over 512 (measured rel-L2 4.7e-3 on this model, within the
    bf16 re-encode tolerance of 2e-2); the 512-token prompt, the same call as the reference, is bit-exact."""
    batch = T5TextEncoder(str(t5_folder), precision="bf16").encode(PROMPTS)
    hidden, lengths, _ = transformers_reference(t5_folder, "T5EncoderModel", PROMPTS, dtype=torch.bfloat16)
    check_rows_against_reference(batch, hidden, lengths, atol=0.07, rel_l2=1e-2)
    np.testing.assert_array_equal(batch.embeddings[3], hidden[3])


def test_fp16_refused_before_loading(t5_folder, monkeypatch):
    def no_loading(*args, **kwargs):
        raise AssertionError("the model must not be loaded for a refused precision")

    monkeypatch.setattr(transformers.T5EncoderModel, "from_pretrained", no_loading)
    with pytest.raises(ConfigError, match="fp16"):
        T5TextEncoder(str(t5_folder), precision="fp16")
    with pytest.raises(ConfigError, match="fp16"):
        T5TextEncoder.from_config(TextConfig(path=str(t5_folder), precision="fp16"), "cpu")


def test_identical_prompts_run_through_the_encoder_once(t5_folder):
    encoder = T5TextEncoder(str(t5_folder))
    seen_rows: list[int] = []
    encoder.model.register_forward_pre_hook(
        lambda module, args, kwargs: seen_rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    distinct = ["a red ball", "a blue cube", "the robot arm"]
    prompts = [distinct[i % 3] for i in (0, 1, 2, 2, 1, 0, 0, 0, 2, 1, 1, 0)]
    batch = encoder.encode(prompts)
    assert seen_rows == [1, 1, 1]  # each distinct prompt once, alone
    for i, prompt in enumerate(prompts):
        first = prompts.index(prompt)
        np.testing.assert_array_equal(batch.embeddings[i], batch.embeddings[first])
    hidden, lengths, _ = transformers_reference(t5_folder, "T5EncoderModel", prompts)
    check_rows_against_reference(batch, hidden, lengths, atol=1e-4)


def test_a_row_depends_on_its_prompt_alone(t5_folder):
    """The same bits whatever else is encoded with it, in which order, and by which encoder instance: rows of
    one prompt agree across units, ranks and resumes."""
    prompt = "the robot arm picks up a cube"
    alone = T5TextEncoder(str(t5_folder)).encode([prompt]).embeddings[0]
    crowd = T5TextEncoder(str(t5_folder)).encode(["x", "boxes slide left " * 50, prompt, ""]).embeddings[2]
    np.testing.assert_array_equal(alone, crowd)
    assert alone.any()


def test_retired_batch_size_key_says_what_to_do(tmp_path):
    with pytest.raises(ConfigError, match="text.batch_size is no longer a setting.*delete the key"):
        load_config(extra={"text": {"batch_size": 8}})


def test_registry_config_and_fingerprint(t5_folder):
    encoder = registry.resolve("text", "t5").from_config(TextConfig(path=str(t5_folder), max_length=512), "cpu")
    assert isinstance(encoder, T5TextEncoder)
    assert text_datasets(encoder.dataset_prefix) == ("t5_text_embeddings", "t5_text_length")
    assert registry.resolve("text", "umt5").dataset_prefix == "umt5"
    fingerprint = encoder.fingerprint()
    # weights_sha256 is the SHA-256 of `sha256sum` output over the weight files, names only
    listing = subprocess.run(["sha256sum", "model.safetensors"], cwd=t5_folder, capture_output=True, check=True)
    assert fingerprint["weights_sha256"] == hashlib.sha256(listing.stdout).hexdigest()
    assert fingerprint["precision"] == "fp32" and fingerprint["max_length"] == 512 and fingerprint["dim"] == 1024
    assert fingerprint["positions"] == "prompt"
    assert str(t5_folder) not in repr(fingerprint)


def test_missing_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="config.json"):
        T5TextEncoder(str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="text.path"):
        T5TextEncoder.from_config(TextConfig(path=None), "cpu")
