"""Cosmos-Predict2 T5 pickles (`t5_xxl/<stem>.pickle`): a restricted reader, an exact writer, and where a
sample's pickle is found (docs/text.md).

A Cosmos pickle is `pickle.dump([np.ndarray float16 (n_tokens, 1024)])`, trimmed to n_tokens =
attention_mask.sum() (formats.md §4). Plain `pickle.load` runs whatever callable the file names, so the
reader admits only the globals numpy needs to rebuild one array and checks the structure afterwards.
"""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import numpy as np

try:  # numpy >= 2
    from numpy._core import multiarray, numeric
except ImportError:  # numpy 1.26
    from numpy.core import multiarray, numeric

from ..config import TextConfig
from ..errors import LatentforgeError
from ..io import write_bytes_atomic

# Protocol 4 is what Cosmos' scripts write under Python 3.8-3.13 (pickle.DEFAULT_PROTOCOL there);
# pinning it keeps our files byte-identical whatever Python writes them.
COSMOS_PICKLE_PROTOCOL = 4
COSMOS_MAX_TOKENS = 512
PICKLE_FOLDER = "t5_xxl"
COSMOS_T5_DIM = 1024  # google-t5/t5-11b's d_model, the width of every Cosmos-Predict2 pickle
PICKLE_PREFIX = "t5"  # pickles hold T5 rows: shard datasets t5_text_embeddings / t5_text_length

# (module, name) -> object. numpy 1.x writes `numpy.core`, numpy 2.x `numpy._core`; protocol 5 rebuilds
# arrays through `_frombuffer` instead of `_reconstruct`. Objects are taken from numpy here, never
# imported by the name the file gives.
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): multiarray._reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): multiarray._reconstruct,
    ("numpy.core.numeric", "_frombuffer"): numeric._frombuffer,
    ("numpy._core.numeric", "_frombuffer"): numeric._frombuffer,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class UnsafePickleError(LatentforgeError):
    """A pickle names a global outside what a Cosmos T5 pickle needs; it was not executed."""


class BadCosmosPickleError(LatentforgeError):
    """A pickle loaded safely but does not hold the Cosmos structure (list of one 2-D float16 array)."""


class _CosmosUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BufferedIOBase, source: Path):
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str) -> object:
        allowed = _ALLOWED_GLOBALS.get((module, name))
        if allowed is None:
            raise UnsafePickleError(
                f"{self.source}: refusing to unpickle global {module}.{name}; a Cosmos T5 pickle may only "
                f"reference {', '.join(sorted(f'{m}.{n}' for m, n in _ALLOWED_GLOBALS))}. Regenerate the file "
                "with `latentforge cosmos t5` if it should be a T5 embedding"
            )
        return allowed

    def persistent_load(self, pid: object) -> object:
        raise UnsafePickleError(f"{self.source}: refusing a persistent id {pid!r}; Cosmos T5 pickles have none")


def read_cosmos_pickle(path: str | Path, dim: int = 1024, max_tokens: int = COSMOS_MAX_TOKENS) -> np.ndarray:
    """Load `path` safely and return its float16 array (n_tokens, dim), n_tokens in [1, max_tokens].

    Raises UnsafePickleError for any global other than numpy's array reconstruction (nothing is called),
    BadCosmosPickleError for a malformed or differently shaped file.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise BadCosmosPickleError(f"{path}: cannot read: {error}") from error
    return load_cosmos_pickle(data, path, dim, max_tokens)


def load_cosmos_pickle(data: bytes, source: Path, dim: int = 1024, max_tokens: int = COSMOS_MAX_TOKENS) -> np.ndarray:
    """read_cosmos_pickle on bytes already read (a build hashes the same bytes it loads); `source` names them."""
    try:
        value = _CosmosUnpickler(io.BytesIO(data), source).load()
    except LatentforgeError:
        raise
    except Exception as error:  # any failure inside pickle machinery means a corrupt or hostile file
        raise BadCosmosPickleError(f"{source}: not a readable pickle ({type(error).__name__}: {error})") from error
    return _check_structure(value, source, dim, max_tokens)


def _check_structure(value: object, path: Path, dim: int, max_tokens: int) -> np.ndarray:
    expected = f"a list holding one float16 array (n_tokens <= {max_tokens}, {dim})"
    if not isinstance(value, list) or len(value) != 1:
        what = f"list of length {len(value)}" if isinstance(value, list) else type(value).__name__
        raise BadCosmosPickleError(f"{path}: holds a {what}; expected {expected}")
    array = value[0]
    if type(array) is not np.ndarray or array.dtype != np.float16 or array.ndim != 2:
        described = f"{array.dtype} array of shape {array.shape}" if isinstance(array, np.ndarray) else type(array)
        raise BadCosmosPickleError(f"{path}: holds {described}; expected {expected}")
    n_tokens, width = array.shape
    if width != dim or not 1 <= n_tokens <= max_tokens:
        raise BadCosmosPickleError(
            f"{path}: array shape {array.shape}; expected {expected}. Check that the pickle was made by the "
            f"same text encoder (D={dim}) and max_length"
        )
    return array


def cosmos_pickle_bytes(row: np.ndarray, length: int) -> bytes:
    """The exact bytes Cosmos' get_t5_embeddings scripts write for one encoded prompt.

    `row` is the padded [max_length, D] float32 row; Cosmos casts to float16 first, then trims to `length`.
    """
    if not 1 <= length <= row.shape[0]:
        raise ValueError(f"length {length} outside [1, {row.shape[0]}]")
    trimmed = np.ascontiguousarray(np.asarray(row).astype(np.float16)[:length])
    return pickle.dumps([trimmed], protocol=COSMOS_PICKLE_PROTOCOL)


def write_cosmos_pickle(path: str | Path, row: np.ndarray, length: int) -> None:
    """Write `path` atomically in the Cosmos format (a list holding one float16 (length, D) array)."""
    write_bytes_atomic(Path(path), cosmos_pickle_bytes(row, length))


def padded_from_pickle(array: np.ndarray, max_length: int = COSMOS_MAX_TOKENS) -> tuple[np.ndarray, int]:
    """A pickle's array as a cache row: float32 [max_length, D] zero-padded, and its n_tokens."""
    n_tokens = array.shape[0]
    if n_tokens > max_length:
        raise ValueError(f"{n_tokens} tokens exceed max_length {max_length}")
    padded = np.zeros((max_length, array.shape[1]), dtype=np.float32)
    padded[:n_tokens] = array
    return padded, n_tokens


# ------------------------------------------------------------------------------------ where pickles live


def uses_pickles(text: TextConfig) -> bool:
    return text.name != "none" and text.source != "encoder"


def pickle_dim(text: TextConfig) -> int:
    """Width of a pickle row: d_model of text.path's config.json when one is given, else Cosmos' 1024."""
    config_file = Path(text.path or "") / "config.json"
    if text.path and config_file.is_file():
        return int(json.loads(config_file.read_text(encoding="utf-8"))["d_model"])
    return COSMOS_T5_DIM
