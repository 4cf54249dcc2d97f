"""`latentforge stats` on a discrete-token cache: token counts, utilisation, per-sample entropy and the report's
token sections, checked against h5py reads, collections.Counter and scipy.stats.entropy; a latent cache's
stats.json keeps its keys."""

from __future__ import annotations

import json
from collections import Counter

import h5py
import numpy as np
import pytest
from scipy.stats import entropy

from helpers.fake_cache import manifest_rows, write_fake_cache
from latentforge.cli.main import main
from latentforge.dataset.synthetic_cache import SyntheticCacheSpec, write_synthetic_cache
from latentforge.report.statistics import compute_stats


@pytest.fixture(scope="module")
def token_cache(tmp_path_factory):
    spec = SyntheticCacheSpec(num_samples=12, modalities=("rgb", "depth"), channels=1, vocabulary=64000,
                              fsq_levels=(8, 8, 8, 5, 5, 5), text_name=None,
                              tokenizer={"name": "cosmos-dv8x8x8", "precision": "fp32"})
    return write_synthetic_cache(tmp_path_factory.mktemp("tokens") / "cache", spec)


def _stored(root):
    rows = manifest_rows(root)
    out = {}
    for row in rows:
        with h5py.File(root / row["shard_path"], "r") as shard:
            out[row["dataset_index"]] = (row["sample_id"], shard["perception_latent_state"][row["cache_row"]])
    return out


def test_token_statistics_equal_independent_counts(token_cache):
    stats = compute_stats(token_cache).tokens
    stored = _stored(token_cache)
    counts = Counter(int(i) for _, ids in stored.values() for i in ids.reshape(-1))
    assert stats.num_tokens == sum(counts.values()) == 12 * 2 * 72
    assert stats.used_ids == len(counts) and stats.utilisation == len(counts) / 64000
    assert stats.sequence_lengths == {72: 12}
    assert stats.rank_frequency == sorted(counts.values(), reverse=True)
    assert [(i, c) for i, c, _ in stats.top_ids[:3]] == [(i, c) for i, c in
                                                         sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
    # FSQ channel c of id: (id // prod(L[:c])) % L[c]; level 0 of channel 0 is used iff some used id is 0 mod 8
    basis = np.cumprod([1, 8, 8, 8, 5, 5])
    for c, (b, n) in enumerate(zip(basis, (8, 8, 8, 5, 5, 5))):
        assert stats.level_utilisation[c] == len({(i // int(b)) % n for i in counts}) / n
    reference = {index: entropy(np.unique(ids, return_counts=True)[1], base=2) for index, (_, ids) in stored.items()}
    lowest = sorted(reference.items(), key=lambda kv: kv[1])[:10]
    assert [s.dataset_index for s in stats.low_entropy] == [index for index, _ in lowest]
    for sample, (index, value) in zip(stats.low_entropy, lowest):
        assert sample.entropy_bits == pytest.approx(value, abs=1e-12)
        assert sample.sample_id == stored[index][0]
        assert sample.distinct_ids == len(np.unique(stored[index][1]))
    assert stats.entropy_bits["mean"] == pytest.approx(np.mean(list(reference.values())), abs=1e-12)


def test_the_report_shows_tokens_not_channels(token_cache, tmp_path, capsys):
    assert main(["stats", str(token_cache), "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "stats.json").read_text())
    assert data["modalities"] == [] and data["tokens"]["vocabulary"] == 64000
    assert data["tokens"]["sequence_lengths"] == {"72": 12} and data["storage_dtype"] == "uint16"
    assert (tmp_path / "token_rank_frequency.png").stat().st_size > 1000
    assert not (tmp_path / "latent_channels.png").exists()
    page = (tmp_path / "report.html").read_text()
    assert "Lowest-entropy samples" in page and "Most frequent ids" in page and "Per channel" not in page
    assert "ids used" in capsys.readouterr().out


def test_a_latent_cache_keeps_its_statistics(tmp_path):
    root = write_fake_cache(tmp_path / "c", num_samples=4)
    data = compute_stats(root).to_json()
    assert "tokens" not in data and len(data["modalities"]) == 3
