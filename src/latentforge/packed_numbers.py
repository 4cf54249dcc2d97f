"""Immutable sequences of floats or integers packed 8 bytes an element, for the per-frame numbers a probe result keeps.

A build holds the probe result of every planned window from the probe until its commit: the video's frame times
and the window's frame indices and times. As tuples of Python numbers those cost 32 bytes an element (the object
and its pointer), about 12 KB for a 5 s clip's 93-frame window; packed, 8. They read like tuples (index, slice,
iterate, len, bisect), equal the tuple of their values (and hash as it), and pickle as their bytes.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

Number = TypeVar("Number", int, float)


class _Packed(Sequence, Generic[Number]):
    """The numbers of `values`, packed as array typecode `_CODE`."""

    __slots__ = ("_data", "_view")
    _CODE = ""

    def __init__(self, values: Iterable[Number] = ()):
        data = array(self._CODE, values).tobytes()
        self._data = data
        self._view = memoryview(data).cast(self._CODE)

    @classmethod
    def _of_bytes(cls, data: bytes) -> Any:
        packed = cls.__new__(cls)
        packed._data = data
        packed._view = memoryview(data).cast(cls._CODE)
        return packed

    def __reduce__(self):
        return (self._of_bytes, (self._data,))

    def __len__(self) -> int:
        return len(self._view)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self._view[index].tolist())
        return self._view[index]

    def __iter__(self) -> Iterator[Number]:
        return iter(self._view.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (_Packed, tuple)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:  # equal to the tuple of its values, so hashed as that tuple
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


class PackedFloats(_Packed[float]):
    """float64 values, e.g. presentation times in seconds."""

    __slots__ = ()
    _CODE = "d"


class PackedInts(_Packed[int]):
    """int64 values, e.g. frame indices."""

    __slots__ = ()
    _CODE = "q"
