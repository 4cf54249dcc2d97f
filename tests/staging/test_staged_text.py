"""A staged unit keeps its text trimmed (each row's tokens up to its length) and reads back the padded rows it was
given, bit for bit, through h5py; a unit whose padding holds values keeps the padded array."""

from __future__ import annotations

import h5py
import numpy as np

from helpers.fake_rows import make_samples, stage_units
from latentforge.staging.staged_units import read_staged_unit


def test_staged_text_is_trimmed_and_reads_back_padded(tmp_path):
    data = make_samples()
    paths = stage_units(tmp_path, data, unit_size=8)
    for path in paths:
        staged = read_staged_unit(path)
        kept = [row.source_index for row in staged.rows]
        np.testing.assert_array_equal(staged.text_embeddings, np.stack([data.embeddings[i] for i in kept]))
        with h5py.File(path, "r") as handle:
            assert "text_embeddings" not in handle  # no padded copy on disk
            assert handle["text_tokens"].shape == (sum(data.lengths[i] for i in kept), 32)


def test_a_unit_with_values_past_a_length_keeps_its_padding(tmp_path):
    data = make_samples()
    first = data.accepted[0]
    data.embeddings[first][-1] = 1.0  # a row handed over with values in its padding
    path = sorted(stage_units(tmp_path, data, unit_size=8))[0]
    staged = read_staged_unit(path)
    np.testing.assert_array_equal(staged.text_embeddings[0], data.embeddings[first])
    with h5py.File(path, "r") as handle:
        assert "text_embeddings" in handle and "text_tokens" not in handle
