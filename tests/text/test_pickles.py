"""Cosmos T5 pickles: the restricted reader refuses code, admits genuine files; the writer is byte-exact."""

from __future__ import annotations

import os
import pickle
import shlex

import numpy as np
import pytest

from latentforge.errors import LatentforgeError
from latentforge.text.pickles import (
    BadCosmosPickleError,
    UnsafePickleError,
    padded_from_pickle,
    read_cosmos_pickle,
    write_cosmos_pickle,
)


def genuine_array(n_tokens=7, dim=1024, seed=0):
    return np.random.default_rng(seed).standard_normal((n_tokens, dim)).astype(np.float16)


class CreatesMarker:
    """Unpickling this runs os.system, the classic pickle exploit."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


def test_malicious_pickle_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    hostile = tmp_path / "t5_xxl" / "clip.pickle"
    hostile.parent.mkdir()
    hostile.write_bytes(pickle.dumps([CreatesMarker(marker)]))
    with pytest.raises(UnsafePickleError) as caught:
        read_cosmos_pickle(hostile)
    assert str(hostile) in str(caught.value) and "system" in str(caught.value)
    assert isinstance(caught.value, LatentforgeError)
    assert not marker.exists()
    # the same bytes through plain pickle do run the payload: the refusal above is what protected us
    with open(hostile, "rb") as handle:
        pickle.load(handle)
    assert marker.exists()


@pytest.mark.parametrize("payload", [[eval], {"x": 1}.items, print])
def test_other_globals_are_refused(tmp_path, payload):
    path = tmp_path / "odd.pickle"
    path.write_bytes(pickle.dumps([payload]))
    with pytest.raises(UnsafePickleError, match="odd.pickle"):
        read_cosmos_pickle(path)


@pytest.mark.parametrize("protocol", [3, 4, 5])
def test_genuine_cosmos_pickle_loads(tmp_path, protocol):
    array = genuine_array()
    path = tmp_path / "clip.pickle"
    with open(path, "wb") as handle:  # exactly what Cosmos' get_t5_embeddings scripts do
        pickle.dump([array], handle, protocol=protocol)
    loaded = read_cosmos_pickle(path)
    assert loaded.dtype == np.float16 and loaded.shape == (7, 1024)
    np.testing.assert_array_equal(loaded, array)


def test_pickle_written_by_numpy_1_loads(tmp_path):
    # numpy 1.x names its reconstructor numpy.core.multiarray; protocol 3 spells globals as text lines
    data = pickle.dumps([genuine_array()], protocol=3)
    old = data.replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")
    assert old != data
    path = tmp_path / "old.pickle"
    path.write_bytes(old)
    np.testing.assert_array_equal(read_cosmos_pickle(path), genuine_array())


@pytest.mark.parametrize(
    "value, match",
    [
        ({"emb": genuine_array()}, "dict"),
        ([genuine_array(), genuine_array()], "length 2"),
        ([genuine_array().astype(np.float32)], "float32"),
        ([genuine_array()[None]], r"\(1, 7, 1024\)"),
        ([genuine_array(dim=4096)], r"\(7, 4096\)"),
        ([genuine_array(n_tokens=513)], r"\(513, 1024\)"),
    ],
)
def test_wrong_structure_is_a_typed_error(tmp_path, value, match):
    path = tmp_path / "bad.pickle"
    path.write_bytes(pickle.dumps(value, protocol=4))
    with pytest.raises(BadCosmosPickleError, match=match):
        read_cosmos_pickle(path)


def test_truncated_pickle_is_a_typed_error(tmp_path):
    path = tmp_path / "cut.pickle"
    path.write_bytes(pickle.dumps([genuine_array()], protocol=4)[:200])
    with pytest.raises(BadCosmosPickleError, match="cut.pickle"):
        read_cosmos_pickle(path)


def test_writer_matches_cosmos_script_bytes(tmp_path):
    row = np.zeros((512, 1024), dtype=np.float32)
    row[:9] = np.random.default_rng(1).standard_normal((9, 1024))
    path = tmp_path / "t5_xxl" / "a.pickle"
    write_cosmos_pickle(path, row, 9)
    # Cosmos: encoded_text.astype(np.float16), trimmed to lengths, pickle.dump(list) (protocol 4 on py3.8-3.13)
    expected = pickle.dumps([row[None].astype(np.float16)[0][:9]], protocol=4)
    assert path.read_bytes() == expected
    with open(path, "rb") as handle:
        value = pickle.load(handle)
    assert isinstance(value, list) and len(value) == 1 and value[0].dtype == np.float16
    padded, n_tokens = padded_from_pickle(read_cosmos_pickle(path))
    assert n_tokens == 9 and padded.dtype == np.float32 and padded.shape == (512, 1024)
    np.testing.assert_array_equal(padded, row.astype(np.float16).astype(np.float32))
    assert not [p for p in path.parent.iterdir() if p.name != "a.pickle"]  # no tmp sibling left
