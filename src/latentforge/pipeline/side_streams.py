"""Per-frame side streams (pose, actions, camera: any numeric vector per frame) cut to each window by time
(docs/modalities.md). A table column names each row's file:

- `.npy` [N, D] with its times in `<stem>.times.npy` [N] (seconds from the video's first frame);
- `.parquet` with a `time` column (seconds from the video's first frame) and D numeric value columns, in file order.

Times must be finite and strictly increasing. Each window frame takes the last row whose time is <= the frame's
presentation time (counted from the video's first frame) + 1 ms, and that row must lie within 1.5 median row
intervals before it; otherwise the stream does not cover the window and the sample is rejected (side_stream_short).
The rows are stored as float32 [T, D] beside the sample's latent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pa_parquet

from ..cache.conditioning_streams import ConditioningStream
from ..config import BuildConfig
from ..errors import SampleRejected
from ..records import Sample, VideoInfo
from ..transforms.time_match import CROSS_STREAM_SLACK, coverage_text, shown_at
from ..transforms.window import FrameWindow

SIDE_DTYPE = "float32"
TIMES_SUFFIX = ".times.npy"  # the times of a .npy side stream: <stem>.times.npy beside it
TIME_COLUMN = "time"  # the times of a .parquet side stream
HOLD_INTERVALS = 1.5  # a row stands for a frame up to this many median row intervals after its time
RULE = (f"each window frame takes the last row whose time is <= its presentation time + {CROSS_STREAM_SLACK:g} s, "
        f"within {HOLD_INTERVALS:g} median row intervals; times in seconds from the video's first frame")


@dataclass(frozen=True)
class SideRows:
    """One side stream's rows for one window: the file, its kind and the row of each window frame."""

    path: str
    kind: str  # npy | parquet
    rows: tuple[int, ...]


def side_specs(config: BuildConfig) -> list[tuple[str, int]]:
    """(stream name, D) of each side stream the config asks for (the table reader's side_columns / side_dims)."""
    options = config.dataset.options
    return list(zip(getattr(options, "side_columns", []), getattr(options, "side_dims", [])))


def side_stream_records(config: BuildConfig) -> tuple[ConditioningStream, ...]:
    """What cache_config.json records of the side streams: name, shape [T, D], dtype, the column and the rule."""
    frames = config.frames.num_frames
    return tuple(ConditioningStream(name, (frames, dim), SIDE_DTYPE, {"column": name, "rule": RULE})
                 for name, dim in side_specs(config))


def probe_side_streams(sample: Sample, config: BuildConfig, info: VideoInfo, window: FrameWindow
                       ) -> dict[str, SideRows]:
    """Each side stream's rows for the window, from the files' times and shapes alone (no values read)."""
    found: dict[str, SideRows] = {}
    wanted = [t - info.pts[0] for t in window.timestamps]
    for name, dim in side_specs(config):
        path = sample.entry.side.get(name)
        if not path or not Path(path).is_file():
            raise SampleRejected("missing_source", sample.sample_id, f"side stream {name!r}: "
                                 f"{path or 'an empty cell'} is not a file; fix the {name} column")
        kind, times, width = _times_and_width(path, name, sample.sample_id)
        if width != dim:
            raise _bad(sample, name, path, f"has {width} values per row, dataset.side_dims says {dim}")
        if len(times) == 0 or not np.isfinite(times).all() or (np.diff(times) <= 0).any():
            raise _bad(sample, name, path, "has times that are not finite and strictly increasing (or no rows)")
        hold = HOLD_INTERVALS * float(np.median(np.diff(times))) if len(times) > 1 else 0.0
        rows = shown_at(times.tolist(), wanted, hold=hold, tail=hold, slack=CROSS_STREAM_SLACK)
        if -1 in rows:
            gap = "" if len(times) < 2 else f", rows held {hold:.3f} s"
            raise SampleRejected("side_stream_short", sample.sample_id,
                                 f"side stream {name!r} {path} ({len(times)} rows{gap}) "
                                 f"{coverage_text(times.tolist(), hold, wanted)} from the video's first frame; "
                                 f"{'first uncovered window frame ' + str(rows.index(-1))}")
        found[name] = SideRows(path, kind, tuple(rows))
    return found


def load_side_values(side: dict[str, SideRows], sample_id: str) -> dict[str, np.ndarray]:
    """{stream name: float32 [T, D]}: the rows of each window frame; NaN or Inf rejects the sample."""
    values: dict[str, np.ndarray] = {}
    for name, rows in side.items():
        table = _values(rows)
        picked = np.ascontiguousarray(table[list(rows.rows)], dtype=np.float32)
        if not np.isfinite(picked).all():
            bad = sorted({rows.rows[t] for t in np.nonzero(~np.isfinite(picked).all(axis=1))[0]})
            raise SampleRejected("bad_side_stream", sample_id, f"side stream {name!r} {rows.path}: rows {bad[:8]} "
                                 "hold NaN, Inf or nulls (as float32); fill them")
        values[name] = picked
    return values


def side_provenance(side: dict[str, SideRows]) -> dict[str, Any]:
    """The manifest's record of which rows each side stream gave the window."""
    return {name: {"rows": list(rows.rows)} for name, rows in side.items()}


def _bad(sample: Sample, name: str, path: str, what: str) -> SampleRejected:
    return SampleRejected("bad_side_stream", sample.sample_id, f"side stream {name!r} {path} {what}")


def _times_and_width(path: str, name: str, sample_id: str) -> tuple[str, np.ndarray, int]:
    """(kind, times, D) of a side stream file, reading only its times and header."""
    suffix = Path(path).suffix.lower()
    try:
        if suffix == ".npy":
            array = np.load(path, mmap_mode="r")
            times_file = path[: -len(suffix)] + TIMES_SUFFIX
            if not Path(times_file).is_file():
                raise SampleRejected("bad_side_stream", sample_id, f"side stream {name!r} {path} has no timestamps: "
                                     f"write its rows' times (seconds) to {Path(times_file).name}")
            times = np.asarray(np.load(times_file), dtype=np.float64)
            if array.ndim != 2 or array.dtype.kind not in "fiu" or times.shape != (array.shape[0],):
                raise SampleRejected("bad_side_stream", sample_id, f"side stream {name!r} {path} is {array.dtype} "
                                     f"{list(array.shape)} with times {list(times.shape)}; expected numbers [N, D] "
                                     "and times [N]")
            return "npy", times, int(array.shape[1])
        if suffix == ".parquet":
            schema = pa_parquet.read_schema(path)
            values = [field for field in schema if field.name != TIME_COLUMN]
            if TIME_COLUMN not in schema.names or any(not _numeric(field.type) for field in values):
                raise SampleRejected("bad_side_stream", sample_id, f"side stream {name!r} {path} has columns "
                                     f"{schema.names}; expected a numeric {TIME_COLUMN!r} column (seconds) and "
                                     "numeric value columns")
            column = pa_parquet.read_table(path, columns=[TIME_COLUMN]).column(0)
            times = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
            return "parquet", times, len(values)
    except (OSError, ValueError, pa.ArrowException) as error:
        raise SampleRejected("bad_side_stream", sample_id, f"side stream {name!r} {path}: {error}") from None
    raise SampleRejected("bad_side_stream", sample_id, f"side stream {name!r} {path} is neither .npy nor .parquet")


def _numeric(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


def _values(rows: SideRows) -> np.ndarray:
    if rows.kind == "npy":
        return np.load(rows.path, mmap_mode="r")
    names = [n for n in pa_parquet.read_schema(rows.path).names if n != TIME_COLUMN]
    table = pa_parquet.read_table(rows.path, columns=names)
    return np.column_stack([np.asarray(table.column(n).to_numpy(zero_copy_only=False), dtype=np.float64)
                            for n in names])
