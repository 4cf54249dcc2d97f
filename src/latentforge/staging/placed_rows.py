"""The accepted rows of a commit in dataset_index order, held as three flat arrays (staged unit, position in it,
source_index): a row's StagedRow is read back from its staged unit when asked for, the last few units' rows kept.
A list of every StagedRow (its provenance dicts and lists) cost about 2 KB a row: 20 GB for ten million rows."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from .staged_units import StagedRow, read_staged_rows


@dataclass(frozen=True)
class PlacedRow:
    """Where an accepted row lives in staging; its place in PlacedRows is its dataset_index."""

    row: StagedRow
    unit_path: Path
    position: int


class _UnitRows:
    """The rows of the staged units read last (commits read rows in dataset order, so unit after unit)."""

    def __init__(self, keep: int = 2):
        self.keep = keep
        self.rows: OrderedDict[Path, list[StagedRow]] = OrderedDict()

    def __call__(self, path: Path) -> list[StagedRow]:
        if path in self.rows:
            self.rows.move_to_end(path)
            return self.rows[path]
        rows = self.rows[path] = read_staged_rows(path)
        while len(self.rows) > self.keep:
            self.rows.popitem(last=False)
        return rows


class PlacedRows(Sequence[PlacedRow]):
    """Rows i of the cache: unit_paths[unit_of[i]], row position[i] of it, with source_index[i]."""

    def __init__(self, unit_paths: Sequence[Path], unit_of: np.ndarray, position: np.ndarray,
                 source_index: np.ndarray, rows: _UnitRows | None = None):
        self.unit_paths = tuple(unit_paths)
        self.unit_of, self.position, self.source_index = unit_of, position, source_index
        self._rows = rows or _UnitRows()

    @classmethod
    def of_units(cls, unit_paths: Sequence[Path], sources: Sequence[np.ndarray]) -> PlacedRows:
        """Every row of these units (sources[k]: the source_index of unit k's rows), in source_index order."""
        unit_of = np.concatenate([np.full(len(s), k, dtype=np.int32) for k, s in enumerate(sources)] or
                                 [np.zeros(0, dtype=np.int32)])
        position = np.concatenate([np.arange(len(s), dtype=np.int32) for s in sources] or
                                  [np.zeros(0, dtype=np.int32)])
        source_index = np.concatenate(list(sources) or [np.zeros(0, dtype=np.int64)]).astype(np.int64)
        order = np.argsort(source_index, kind="stable")  # as list.sort: equal sources keep the units' order
        return cls(unit_paths, unit_of[order], position[order], source_index[order])

    def __len__(self) -> int:
        return len(self.source_index)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            pick = slice(*index.indices(len(self)))
            return PlacedRows(self.unit_paths, self.unit_of[pick], self.position[pick], self.source_index[pick],
                              self._rows)
        index = range(len(self))[index]  # negative indices; IndexError past the end
        path = self.unit_path_at(index)
        position = int(self.position[index])
        return PlacedRow(self._rows(path)[position], path, position)

    def __iter__(self) -> Iterator[PlacedRow]:
        for index in range(len(self)):
            yield self[index]

    def unit_path_at(self, index: int) -> Path:
        return self.unit_paths[int(self.unit_of[index])]

    def units(self) -> list[Path]:
        """The staged units these rows come from, sorted."""
        return sorted(self.unit_paths[k] for k in np.unique(self.unit_of))
