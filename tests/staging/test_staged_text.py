"""A staged unit keeps its text trimmed (each row's tokens up to its length) and reads back the padded rows it was
given, bit for bit, through h5py; a unit whose padding holds values keeps the padded array."""

from __future__ import annotations

import h5py
import numpy as np

from helpers.fake_rows import make_samples, stage_units
from latentforge.staging.staged_unit_writer import write_staged_unit
from latentforge.staging.staged_units import StagedRow, read_staged_unit


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


def _unit_file(build_dir, embeddings, lengths, max_length=None) -> bytes:
    rows = [StagedRow(sample_id=f"s{i}", source_index=i, prompt="p", prompt_truncated=False, source_path="v.mp4",
                      unit=0, batch=0, provenance={}, extra={}) for i in range(len(lengths))]
    latents = np.zeros((len(lengths), 4, 1, 2, 2), np.float16)
    path = write_staged_unit(build_dir, 0, rows, latents, embeddings, lengths, [], text_max_length=max_length)
    return path.read_bytes()


def test_rows_padded_only_to_their_longest_stage_the_same_bytes_as_rows_padded_to_max_length(tmp_path):
    """The prompt cache pads a unit's rows to their longest, not to max_length: the staged file is the same bytes,
    whether its text is trimmed or, with values past a length, kept padded."""
    lengths = np.array([3, 7, 5], dtype=np.int64)
    full = np.zeros((3, 16, 8), np.float16)
    for i, length in enumerate(lengths):
        full[i, :length] = np.arange(1, length * 8 + 1).reshape(length, 8) * (i + 1)
    narrow = full[:, : lengths.max()]
    assert _unit_file(tmp_path / "a", full, lengths) == _unit_file(tmp_path / "b", narrow, lengths, 16)
    full[0, 5] = 1.0  # a value past row 0's length, within the longest row: kept padded to max_length
    narrow = full[:, : lengths.max()]
    assert _unit_file(tmp_path / "c", full, lengths) == _unit_file(tmp_path / "d", narrow, lengths, 16)
    with h5py.File(tmp_path / "d" / "staging" / "unit-000000.h5", "r") as handle:
        assert handle["text_embeddings"].shape == (3, 16, 8)
