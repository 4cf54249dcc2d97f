"""Writing one export file so that it exists only once it reads back equal: tmp sibling, load it back with
safetensors or `torch.load(weights_only=True)`, compare every tensor and value, fsync, rename.

Safetensors files are serialised in memory and written with an ordinary open(), so they get the mode every
other cache file gets (0666 less the umask); safetensors' save_file would leave them 0600."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes

from ..errors import CacheIntegrityError
from ..io import atomic_path
from .files import ExportFile


def write_verified(folder: Path, file: ExportFile) -> None:
    with atomic_path(folder / file.rel) as tmp:
        if file.is_safetensors:
            tmp.write_bytes(safetensors_bytes(file.tensors, metadata=file.metadata))
            loaded: dict[str, Any] = load_file(str(tmp))
            with safe_open(str(tmp), framework="pt") as handle:
                metadata = handle.metadata()
            if metadata != file.metadata:
                raise CacheIntegrityError(f"{folder / file.rel}: metadata read back {metadata}, wrote {file.metadata}")
        else:
            torch.save(file.tensors, tmp)
            loaded = torch.load(tmp, map_location="cpu", weights_only=True)
        problem = _difference(file.tensors, loaded)
        if problem:
            raise CacheIntegrityError(f"{folder / file.rel}: read back differs from the cache: {problem}")


def _difference(wrote: dict[str, Any], read: dict[str, Any]) -> str | None:
    if list(read) != list(wrote) and sorted(read) != sorted(wrote):
        return f"keys {sorted(read)}, wrote {sorted(wrote)}"
    for key, value in wrote.items():
        back = read[key]
        if isinstance(value, torch.Tensor):
            if not (isinstance(back, torch.Tensor) and back.dtype == value.dtype and torch.equal(back, value)):
                return f"{key} differs"
        elif back != value:
            return f"{key}: {back!r}, wrote {value!r}"
    return None
