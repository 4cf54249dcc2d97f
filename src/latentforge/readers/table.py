"""Reader for tables of video paths and captions: CSV, JSONL or Parquet, one file or many part files.

All three formats go through pyarrow so the same rows give the same entries: the columns that hold ids,
paths and captions are read as text, pass-through columns keep their types (ints stay ints).
"""

from __future__ import annotations

import dataclasses
import os
import re
import unicodedata
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import DatasetConfig
from ..errors import ConfigError, InputNotice
from ..locations import is_url
from ..records import Sample, SourceEntry
from .base import Reader
from .table_files import TABLE_FORMATS, json_column, read_table, table_parts, without_nan

if TYPE_CHECKING:
    from ..config.schema import BuildConfig

# The columns that give the sample ids when dataset.id_column is unset, the first one a table has.
ID_COLUMNS = ("id", "sample_id")


@dataclass(frozen=True)
class TableOptions:
    """The table reader's own keys (dataset.KEY): which columns hold what."""

    id_column: str | None = None  # the sample id; unset: an `id` or `sample_id` column, else the video path
    video_column: str = "video"
    caption_column: str = "caption"
    mask_column: str | None = None
    depth_column: str | None = None
    passthrough_columns: list[str] = field(default_factory=list)  # copied into each manifest row
    t5_pickle_column: str | None = None  # each row's Cosmos T5 pickle (text.source pickles*)
    # a segment of the row's video, [start, end) (docs/long-videos.md): many rows per video, a caption each
    start_column: str | None = None
    end_column: str | None = None
    segment_unit: str = "seconds"  # seconds (from the video's first frame) | frames (0-based frame indices)
    # per-frame side streams (docs/modalities.md): columns naming each row's .npy [N, D] (times in <stem>.times.npy)
    # or .parquet (a `time` column in seconds, then D value columns); the stream is named by its column
    side_columns: list[str] = field(default_factory=list)
    side_dims: list[int] = field(default_factory=list)  # D of each side column, in the same order


SEGMENT_UNITS = ("seconds", "frames")
# keys recorded (cache_config.json, the resume key) only when set, so caches built without them keep their bytes
SEGMENT_KEYS = {"start_column": None, "end_column": None, "segment_unit": "seconds", "side_columns": [],
                "side_dims": []}


# Names a side stream may not take: the keys a training item already has, and the cache's own datasets
_TAKEN_NAMES = ("latent", "tokens", "conditioning_latent", "text_embeddings", "text_mask", "text_length",
                "token_length", "dataset_index", "source_index", "sample_id", "prompt", "time", "image_cond_latent",
                "clip_image_embeds")
_SIDE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def check_side_columns(config: BuildConfig) -> None:
    """dataset.side_columns / side_dims: one width per column, names a dataset and an item key can take, one shape
    per cache."""
    columns = table_options(config.dataset)
    names, dims = columns.side_columns, columns.side_dims
    if len(dims) != len(names) or any(d < 1 for d in dims):
        raise ConfigError(f"dataset.side_dims={dims!r} must give one width D >= 1 for each of dataset.side_columns="
                          f"{names!r} (the values per row of each stream, in the same order)")
    for name in names:
        taken = name in _TAKEN_NAMES or name == config.output.latent_dataset or name.endswith(
            ("_text_embeddings", "_text_length"))
        if not _SIDE_NAME.match(name) or taken or names.count(name) > 1:
            raise ConfigError(f"dataset.side_columns: {name!r} cannot name a side stream (its HDF5 dataset and item "
                              "key): use letters, digits and _, once each, and none of " + ", ".join(_TAKEN_NAMES))
    if names and config.frames.buckets:
        raise ConfigError("dataset.side_columns are stored for single-shape caches only, but frames.buckets is set; "
                          "build one cache per shape, or drop the side columns")


def table_options(config: DatasetConfig) -> TableOptions:
    """config's table keys; their defaults for a DatasetConfig made without them (options=NoOptions())."""
    return config.options if isinstance(config.options, TableOptions) else TableOptions()


class TableReader(Reader):
    """One SourceEntry per table row, parts concatenated in sorted path order.

    Relative paths resolve against the folder of the table file that holds them; video_rel keeps the path
    as written (NFC). key = dataset.id_column when set, else the first table's `id` or `sample_id` column, else
    video_rel without its extension.
    """

    name = "table"
    modalities = ("rgb", "mask", "depth")
    options_class = TableOptions

    def __init__(self, config: DatasetConfig):
        super().__init__(config)
        if not config.path:
            raise ConfigError("dataset.path is empty; give the table file(s) or a glob")
        self.columns = table_options(config)

    @classmethod
    def claims(cls, paths: list[str]) -> bool:
        """dataset.reader=auto: table files or globs of them, by suffix."""
        return bool(paths) and all(Path(p).suffix.lower() in TABLE_FORMATS for p in paths)

    def _columns(self, id_column: str | None) -> dict[str, str | None]:
        c = self.columns
        return {"id": id_column, "video": c.video_column, "caption": c.caption_column,
                "mask": c.mask_column, "depth": c.depth_column, "t5_pickle": c.t5_pickle_column,
                "start": c.start_column, "end": c.end_column}

    @classmethod
    def check_config(cls, config: BuildConfig) -> None:
        super().check_config(config)
        columns, names = table_options(config.dataset), config.modalities.names
        for modality, column in (("mask", columns.mask_column), ("depth", columns.depth_column)):
            if column and modality not in names:
                raise ConfigError(f"dataset.{modality}_column={column!r} is set but {modality!r} is not in "
                                  f"modalities.names {names!r}; add it or unset the column")
            if modality in names and not column:
                raise ConfigError(
                    f"modality {modality!r} is configured but dataset.{modality}_column is not set; set it to the "
                    f"table column holding the {modality} source, or drop {modality!r} from modalities.names"
                )
        check_side_columns(config)
        if columns.segment_unit not in SEGMENT_UNITS:
            raise ConfigError(f"dataset.segment_unit={columns.segment_unit!r}; allowed: {', '.join(SEGMENT_UNITS)}")
        pickles = config.text.source != "encoder"
        if pickles and not columns.t5_pickle_column:
            raise ConfigError(f"text.source={config.text.source!r} with dataset.reader=table needs "
                              "dataset.t5_pickle_column: the table column holding each row's pickle path")
        if columns.t5_pickle_column and not pickles:
            raise ConfigError(f"dataset.t5_pickle_column={columns.t5_pickle_column!r} is set but text.source="
                              "encoder reads no pickles; set text.source=pickles or pickles+encoder, or unset the "
                              "column")

    @classmethod
    def recorded_keys(cls, options) -> dict[str, Any]:
        """The keys cache_config.json and the resume key record: the segment and side keys only when set."""
        keys = dataclasses.asdict(options if isinstance(options, TableOptions) else TableOptions())
        return {k: v for k, v in keys.items() if k not in SEGMENT_KEYS or v != SEGMENT_KEYS[k]}

    @classmethod
    def pickle_lookup_rule(cls, config: BuildConfig) -> str:
        return f"table column {table_options(config.dataset).t5_pickle_column!r}"

    @classmethod
    def pickle_path(cls, sample: Sample, config: BuildConfig) -> Path | None:
        pickle = sample.entry.t5_pickle
        return None if pickle is None else Path(pickle)

    def entries(self) -> list[SourceEntry]:
        id_column, id_setting = self.columns.id_column, "dataset.id_column"
        entries: list[SourceEntry] = []
        for number, part in enumerate(table_parts(self.config.path)):
            numbers = {self.columns.start_column, self.columns.end_column}
            text = [n for n in self._columns(id_column).values() if n and n not in numbers]
            text += list(self.columns.side_columns)
            text += [] if id_column else list(ID_COLUMNS)
            table = read_table(part, text)
            if number == 0 and id_column is None:
                id_column = self._found_id_column(part, table.column_names)
                id_setting = "dataset.id_column (unset, so the first table's)"
            roles = {role: name for role, name in self._columns(id_column).items() if name}
            self._check_columns(part, table.column_names, roles, id_setting)
            passthrough = {n: json_column(table, n, part) for n in self.columns.passthrough_columns}
            sides = {n: table.column(n).to_pylist() for n in self.columns.side_columns}
            columns = {role: table.column(name).to_pylist() for role, name in roles.items()}
            extras = {name: column.to_pylist() for name, column in passthrough.items()}
            for row in range(table.num_rows):
                values = {role: column[row] for role, column in columns.items()}
                extra = {name: without_nan(column[row]) for name, column in extras.items()}
                entry = self._entry(part, row + 1, values, extra, id_column)
                if sides:
                    where = f"{entry.origin} (1-based, header not counted)"
                    entry.side.update({n: self._resolved(part, self._path_text(column[row], n, where))
                                       for n, column in sides.items()})
                entries.append(entry)
        if not entries:
            raise ConfigError(f"the table(s) {self.config.path!r} hold no rows; nothing to cache")
        return entries

    @staticmethod
    def _found_id_column(part: Path, names: list[str]) -> str | None:
        """The column that gives the ids when dataset.id_column is unset, said once as the listing is read."""
        found = next((name for name in ID_COLUMNS if name in names), None)
        if found is not None:
            warnings.warn(f"sample ids come from the table's {found!r} column (dataset.id_column is unset; set it to "
                          "use another column)", InputNotice, stacklevel=3)
        else:
            warnings.warn(f"sample ids are the video paths without their extension: {part.name} has no "
                          f"{ID_COLUMNS[0]!r} or {ID_COLUMNS[1]!r} column (set dataset.id_column to name one); "
                          "a video listed twice keeps its first row", InputNotice, stacklevel=3)
        return found

    def _check_columns(self, part: Path, names: list[str], roles: dict[str, str], id_setting: str) -> None:
        wanted = [(id_setting if role == "id" else f"dataset.{role}_column", name) for role, name in roles.items()]
        wanted += [("dataset.passthrough_columns", name) for name in self.columns.passthrough_columns]
        wanted += [("dataset.side_columns", name) for name in self.columns.side_columns]
        for setting, name in wanted:
            if name not in names:
                raise ConfigError(f"table {part}: {setting}={name!r} is not a column; the table's columns are: "
                                  f"{', '.join(names)}")
            if names.count(name) > 1:
                raise ConfigError(f"table {part}: column {name!r} appears {names.count(name)} times; rename one")

    def _entry(self, part: Path, row: int, values: dict[str, Any], extra: dict[str, Any],
               id_column: str | None) -> SourceEntry:
        origin = f"table {part} row {row}"
        where = f"{origin} (1-based, header not counted)"
        video_rel = self._path_text(values["video"], "video", where)
        if video_rel is None:
            raise ConfigError(f"{where}: the video cell ({self.columns.video_column!r}) is empty; fill it or "
                              "drop the row")
        written = unicodedata.normalize("NFC", video_rel)
        key = self._id_text(values["id"], id_column, where) if "id" in values else os.path.splitext(written)[0]
        return SourceEntry(
            key=key,
            video=str(part.parent / video_rel),
            video_rel=written,
            caption=self._caption(values["caption"], where),
            mask=self._resolved(part, self._path_text(values.get("mask"), "mask", where)),
            depth=self._resolved(part, self._path_text(values.get("depth"), "depth", where)),
            t5_pickle=self._resolved(part, self._path_text(values.get("t5_pickle"), "t5_pickle", where)),
            extra=extra,
            segment=self._segment(values, where),
            origin=origin,
        )

    def _segment(self, values: dict[str, Any], where: str) -> dict[str, Any] | None:
        """The row's [start, end) when the table has segment columns; whether it fits its video is the plan's
        question (pipeline/segments.py), answered with a bad_segment reject naming the row."""
        if "start" not in values and "end" not in values:
            return None
        ends = {}
        for role in ("start", "end"):
            value = values.get(role)
            if isinstance(value, str):
                try:
                    value = float(value) if value.strip() else None
                except ValueError:
                    value = False
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or value != value):
                column = getattr(self.columns, f"{role}_column")
                raise ConfigError(f"{where}: segment {role} {values.get(role)!r} in column {column!r} is not a number")
            if value is not None and self.columns.segment_unit == "frames" and float(value) != int(value):
                raise ConfigError(f"{where}: segment {role} {value!r} is not a whole frame number "
                                  "(dataset.segment_unit=frames)")
            ends[role] = value
        return {**ends, "unit": self.columns.segment_unit}

    @staticmethod
    def _id_text(value: Any, column: str | None, where: str) -> str:
        # bool is an int subclass, and True as an id is surely a wrong column
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            raise ConfigError(f"{where}: id {value!r} in column {column!r} must be a non-empty string or an "
                              "integer")
        return unicodedata.normalize("NFC", str(value))

    def _path_text(self, value: Any, role: str, where: str) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {role} path {value!r} is not text")
        if is_url(value):
            raise ConfigError(f"{where}: {role} {value!r} is a URL; URLs are not supported yet, download the "
                              "files and list local paths")
        return value

    @staticmethod
    def _resolved(part: Path, written: str | None) -> str | None:
        return None if written is None else str(part.parent / written)

    def _caption(self, value: Any, where: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{where}: caption {value!r} in column {self.columns.caption_column!r} is not text")
        return value.strip()
