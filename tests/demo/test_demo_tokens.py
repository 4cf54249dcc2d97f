"""`latentforge demo --tokenizer cosmos-dv8x16x16`: the generated world through a tiny random Cosmos DV tokenizer
into a discrete-token cache that verifies, with token statistics printed and in the report; the next commands
name the token example, which trains on the cache."""

from __future__ import annotations

import json
import re

import h5py
import numpy as np
import pytest

from helpers.builds import run_cli
from helpers.examples import load_train_tokens


@pytest.mark.slow  # a whole demo build, deep verify and stats with a Cosmos model: ~20 s on a shared CPU
def test_the_token_demo_shows_token_statistics(tmp_path, capsys):
    done = run_cli("demo", "--out", "dv", "--tokenizer", "cosmos-dv8x16x16", cwd=tmp_path)  # as a user runs it
    assert done.returncode == 0, done.stdout + done.stderr
    printed = done.stdout
    assert "vocabulary used" in printed and "of 64000 ids" in printed and "train_tokens.py --cache dv/cache" in printed
    root = tmp_path / "dv" / "cache"
    config = json.loads((root / "cache_config.json").read_text())
    assert config["latent"]["shape"] == [3, 3, 4, 6] and config["latent"]["tokens"]["sequence_length"] == 72
    with h5py.File(next((root / "shards").glob("*.h5")), "r") as shard:
        ids = shard["perception_latent_state"][()]
    assert ids.dtype == np.uint16 and len(np.unique(ids)) > 20  # an untrained but live tokenizer
    report = json.loads((root / "build" / "stats" / "stats.json").read_text())["tokens"]
    assert report["used_ids"] >= len(np.unique(ids))
    # the example learns the demo's ids: below the unigram baseline (fewer steps than its default 300, which ends
    # near 5.4 nats against a baseline of 10.2), and says so
    example = load_train_tokens()
    assert example.main(["--cache", str(root), "--steps", "100"]) == 0
    printed = capsys.readouterr().out
    step0, final, baseline = (float(re.search(rf"{what} ([0-9.]+)", printed).group(1))
                              for what in ("step 0", r"100 steps \([0-9.]+ s\)", "unigram baseline"))
    assert final < baseline < step0, printed
    assert "the model beats the unigram baseline" in printed
