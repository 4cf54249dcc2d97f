"""tokenizer.conv_plans_file: a plan book carried from another machine, read from a build's book file or from a
cache's cache_config.json (which book of the cache applies is docs/tokenizers.md's rule), refused with the file's
name when it is missing, damaged or holds no plans."""

from __future__ import annotations

import dataclasses
import json

import pytest

from helpers.fake_rows import make_cache_config
from latentforge.config import TokenizerConfig
from latentforge.errors import ConfigError, DamagedFile
from latentforge.tokenizers.kernels.carried_books import carried_book
from latentforge.tokenizers.wan import common
from latentforge.tokenizers.wan.common import WanOptions, check_fast_path_packages

BOOK = {"x[1, 96, 9, 64, 64] conv": "eng41_k2=0", "x[2, 96, 9, 64, 64] conv": "pytorch"}
OTHER = {"x[1, 96, 9, 64, 64] conv": "eng3"}


def cache_config_file(tmp_path, books):
    """A cache_config.json as a build writes it (CacheConfig.write), recording `books`."""
    config = dataclasses.replace(make_cache_config(), conv_plans=books)
    config.write(tmp_path)
    return tmp_path / "cache_config.json"


def test_a_build_book_file_is_taken_whatever_the_environment(tmp_path):
    path = tmp_path / "0123456789abcdef.json"
    path.write_text(json.dumps(BOOK))
    assert carried_book(path, "fedcba9876543210") == BOOK


def test_a_cache_config_gives_the_book_of_this_environment_or_its_only_one(tmp_path):
    both = cache_config_file(tmp_path / "both", {"aaaa": BOOK, "bbbb": OTHER})
    assert carried_book(both, "bbbb") == OTHER and carried_book(both, "aaaa") == BOOK
    single = cache_config_file(tmp_path / "single", {"aaaa": BOOK})
    assert carried_book(single, "another digest") == BOOK  # naming the file is the user's choice
    with pytest.raises(ConfigError) as error:
        carried_book(both, "cccc")
    assert "aaaa, bbbb" in str(error.value) and "cccc" in str(error.value) and str(both) in str(error.value)


def test_a_cache_without_plans_and_a_missing_file_are_config_errors_naming_the_file(tmp_path):
    plain = cache_config_file(tmp_path / "plain", None)
    with pytest.raises(ConfigError, match="records no kernel plans") as error:
        carried_book(plain, "aaaa")
    assert str(plain) in str(error.value)
    with pytest.raises(ConfigError, match="does not exist"):
        carried_book(tmp_path / "absent.json", "aaaa")


@pytest.mark.parametrize("text", ['{"x conv": "eng41", ', '["eng41"]', '{"x conv": 3}',
                                  '{"tokenizer": {}, "conv_plans": {"aaaa": ["eng41"]}}'])
def test_a_damaged_file_is_refused_naming_it(tmp_path, text):
    path = tmp_path / "book.json"
    path.write_text(text)
    with pytest.raises(DamagedFile) as error:
        carried_book(path, "aaaa")
    assert str(path) in str(error.value) and "conv_plans_file" in str(error.value)


def test_the_key_is_checked_by_the_preflight_before_any_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "require_cudnn_frontend", lambda: None)  # no cuDNN frontend on this machine
    damaged = tmp_path / "book.json"
    damaged.write_text("{")
    cfg = TokenizerConfig(name="wan2.1", checkpoint="vae.pth", precision="bf16",
                          options=WanOptions(conv_plans_file=str(damaged)))
    with pytest.raises(DamagedFile, match="book.json"):
        check_fast_path_packages(cfg, "cuda:0")
    check_fast_path_packages(cfg, "cpu")  # no recorded plans run on the CPU: the key does not apply
    damaged.write_text(json.dumps(BOOK))
    check_fast_path_packages(cfg, "cuda:0")
