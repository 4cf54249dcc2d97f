"""examples/train_tiny.py on a small cache: defaults shrink to fit, a held-out set that leaves fewer rows than a
batch still trains, and values that cannot fit end with one line and exit 2."""

from __future__ import annotations

import pytest

from helpers.examples import load_train_tiny
from helpers.fake_cache import write_fake_cache
from latentforge.errors import ConfigError


@pytest.fixture(scope="module")
def example():
    return load_train_tiny()


@pytest.fixture(scope="module")
def small_cache(tmp_path_factory):
    return write_fake_cache(tmp_path_factory.mktemp("small") / "cache", num_samples=9, rows_per_shard=4)


@pytest.mark.parametrize("num_samples, held_out, batch_size, expected", [
    (96, None, None, (80, 16, 8)),
    (9, None, None, (7, 2, 7)),
    (2, None, None, (1, 1, 1)),
    (9, 3, None, (6, 3, 6)),
    (9, 3, 4, (6, 3, 4)),
])
def test_split_fits_the_cache(example, num_samples, held_out, batch_size, expected):
    split = example.split_cache(num_samples, held_out, batch_size)
    assert (split.train, split.held_out, split.batch_size) == expected


@pytest.mark.parametrize("num_samples, held_out, batch_size, named", [
    (1, None, None, "at least 2"),
    (9, 9, None, "--held-out 9"),
    (9, 0, None, "--held-out 0"),
    (9, 3, 8, "--batch-size 8"),
])
def test_split_refuses_what_cannot_fit(example, num_samples, held_out, batch_size, named):
    with pytest.raises(ConfigError, match=named):
        example.split_cache(num_samples, held_out, batch_size)


def test_fewer_training_rows_than_the_default_batch_still_train(example, small_cache, capsys):
    assert example.main(["--cache", str(small_cache), "--held-out", "3", "--steps", "3"]) == 0
    assert "6 to train on in batches of 6, 3 held out; 3 steps" in capsys.readouterr().out


@pytest.mark.parametrize("flags", [["--held-out", "16"], ["--held-out", "3", "--batch-size", "8"], ["--steps", "0"]])
def test_a_value_that_cannot_fit_is_one_line_and_exit_2(example, small_cache, capsys, flags):
    assert example.main(["--cache", str(small_cache), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and flags[-2] in err
