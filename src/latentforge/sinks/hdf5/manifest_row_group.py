"""One row group of manifest.parquet gathered from record batches into one chunk per column, the table pa.array of
each whole column would make.

The Parquet writer's dictionary and page decisions follow the chunks it is given, so manifest.parquet keeps its bytes
only when each column of a row group is one chunk. Each column's batches are appended into growing buffers (its
values, a validity byte a row, and for text its offsets) that become the column's array without a copy, so a row group
is held about once: keeping every batch's arrays and joining them at the end held a column twice, and left the
allocator holding the batches' memory (1.4 GB peak for a 1M-row row group, about 470 MB of it text)."""

from __future__ import annotations

import mmap

import numpy as np
import pyarrow as pa

# The most bytes one string array holds (int32 offsets). A column past it stays in the chunks it was appended in,
# as pa.concat_arrays refuses it (the rows' text would not fit one chunk whatever made it).
MAX_TEXT_BYTES = 2**31 - 1


class _Buffer:
    """Bytes appended to anonymous memory that grows by remapping it: no copies, and only the pages written are held
    (bytearrays growing side by side left the heap in pieces: about 30 MB more for a 1M-row row group)."""

    def __init__(self, data: bytes = b""):
        self.memory = mmap.mmap(-1, max(len(data), mmap.PAGESIZE), flags=mmap.MAP_PRIVATE)  # shared would not grow
        self.size = 0
        self.extend(data)

    def __len__(self) -> int:
        return self.size

    def extend(self, data) -> None:
        end = self.size + len(data)
        if end > len(self.memory):
            self.memory.resize(max(end, 2 * len(self.memory)))
        self.memory[self.size:end] = data
        self.size = end

    def view(self) -> memoryview:
        return memoryview(self.memory)[:self.size]


class _Column:
    """A column appended a chunk at a time: validity kept as a byte a row, packed into bits at the end."""

    def __init__(self, kind: pa.DataType):
        self.kind = kind
        self.valid = _Buffer()
        self.nulls = 0

    def append(self, values: pa.Array) -> None:
        count, first = len(values), values.offset
        if values.null_count:
            bits = np.unpackbits(np.frombuffer(values.buffers()[0], dtype=np.uint8), bitorder="little")
            self.valid.extend(bits[first:first + count].tobytes())
        else:
            self.valid.extend(b"\x01" * count)
        self.nulls += values.null_count
        self._append_values(values)

    def _append_values(self, values: pa.Array) -> None:
        raise NotImplementedError

    def finish(self) -> pa.Array | pa.ChunkedArray:
        return pa.Array.from_buffers(self.kind, len(self.valid), [self._validity(), *self._value_buffers()],
                                     null_count=self.nulls)

    def _value_buffers(self) -> list[pa.Buffer]:
        raise NotImplementedError

    def _validity(self) -> pa.Buffer | None:
        if not self.nulls:
            return None
        return pa.py_buffer(np.packbits(np.frombuffer(self.valid.view(), dtype=np.uint8), bitorder="little"))


class _Fixed(_Column):
    """Integers and floats: their values' bytes."""

    def __init__(self, kind: pa.DataType):
        super().__init__(kind)
        self.width = kind.bit_width // 8
        self.data = _Buffer()

    def _append_values(self, values: pa.Array) -> None:
        start = values.offset * self.width
        self.data.extend(memoryview(values.buffers()[1])[start:start + len(values) * self.width])

    def _value_buffers(self) -> list[pa.Buffer]:
        return [pa.py_buffer(self.data.view())]


class _Bool(_Column):
    """Booleans: a byte a value, packed into bits at the end."""

    def __init__(self, kind: pa.DataType):
        super().__init__(kind)
        self.data = _Buffer()

    def _append_values(self, values: pa.Array) -> None:
        bits = np.unpackbits(np.frombuffer(values.buffers()[1], dtype=np.uint8), bitorder="little")
        self.data.extend(bits[values.offset:values.offset + len(values)].tobytes())

    def _value_buffers(self) -> list[pa.Buffer]:
        return [pa.py_buffer(np.packbits(np.frombuffer(self.data.view(), dtype=np.uint8), bitorder="little"))]


class _Text(_Column):
    """Strings: their UTF-8 bytes and int32 offsets."""

    def __init__(self, kind: pa.DataType):
        super().__init__(kind)
        self.data = _Buffer()
        self.offsets = _Buffer(np.zeros(1, dtype=np.int32).tobytes())
        self.lengths: list[int] = []  # rows of each appended chunk, to give the chunks back past MAX_TEXT_BYTES
        self.chunks: list[pa.Array] | None = None  # set once the column is past MAX_TEXT_BYTES

    def append(self, values: pa.Array) -> None:
        if self.chunks is None:
            ends = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset:values.offset + len(values) + 1]
            if len(self.data) + int(ends[-1]) - int(ends[0]) > MAX_TEXT_BYTES:
                self.chunks = self._appended()
                self.data = self.offsets = self.valid = None  # now in the chunks
        if self.chunks is not None:
            self.chunks.append(values)
            return
        super().append(values)
        self.lengths.append(len(values))

    def _append_values(self, values: pa.Array) -> None:
        ends = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset:values.offset + len(values) + 1]
        start, end = int(ends[0]), int(ends[-1])
        ends = ends[1:].astype(np.int64) + len(self.data) - start
        if end > start:
            self.data.extend(memoryview(values.buffers()[2])[start:end])
        self.offsets.extend(ends.astype(np.int32).tobytes())

    def finish(self) -> pa.Array | pa.ChunkedArray:
        if self.chunks is not None:
            return pa.chunked_array(self.chunks, type=self.kind)
        return super().finish()

    def _value_buffers(self) -> list[pa.Buffer]:
        return [pa.py_buffer(self.offsets.view()), pa.py_buffer(self.data.view())]

    def _appended(self) -> list[pa.Array]:
        """What was appended so far, in the chunks it came in."""
        whole, chunks, start = super().finish(), [], 0
        for count in self.lengths:
            chunks.append(whole.slice(start, count))
            start += count
        return chunks


def _column(kind: pa.DataType) -> _Column:
    """The builder of a column of this type: manifest.parquet's columns are strings, booleans, integers or floats."""
    if pa.types.is_string(kind):
        return _Text(kind)
    return _Bool(kind) if pa.types.is_boolean(kind) else _Fixed(kind)


class RowGroup:
    """The record batches of one row group, appended in order; `table()` gives them as one chunk per column."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.columns: list[_Column | None] = [_column(field.type) for field in schema]
        self.num_rows = 0

    def append(self, batch: pa.RecordBatch) -> None:
        for column, values in zip(self.columns, batch.columns):
            column.append(values)
        self.num_rows += batch.num_rows

    def table(self) -> pa.Table:
        """The row group's table; the columns' buffers move into it (the RowGroup is spent)."""
        joined = []
        for i in range(len(self.columns)):
            column, self.columns[i] = self.columns[i], None
            joined.append(column.finish())
            del column
        return pa.table(joined, schema=self.schema)
