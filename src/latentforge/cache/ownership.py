"""Whose folder is it. A verb that writes a cache (build, --extend, --overwrite, fetch) writes only into a root that
is empty, or that latentforge made and that holds nothing else; anything else is refused before a byte is written,
naming the folder and what in it latentforge did not write (docs/cli.md, "What latentforge may touch").

"Made by latentforge" is shown by its own records: a cache_config.json or buckets.json of its format, or the run
records a build keeps (its lock and run.json). "Nothing else" is the sink's layout (RootLayout): the names a root of
that format holds at its top, the shard names in shards/, and one cache per bucket under buckets/.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..errors import ConfigError
from .layout import (
    BUCKET_INDEX,
    BUCKETS_DIR,
    CACHE_CONFIG,
    COMPLETE_MARKER,
    LOCK,
    RUN_RECORD,
    RUN_RECORDS_DIR,
    SHARDS_DIR,
    TMP_LEFTOVER,
)
from .root import CacheRoot

_SHOWN = 5  # foreign names quoted in a refusal
_FORMATS = {CACHE_CONFIG: "latentforge-cache", BUCKET_INDEX: "latentforge-buckets"}


@dataclass(frozen=True)
class RootLayout:
    """What a cache root of one sink may hold."""

    top: frozenset[str]  # names at the root's top (files and folders)
    shard_file: Callable[[str], bool]  # is a name inside shards/ one of this sink's shard files
    opaque: frozenset[str] = frozenset({RUN_RECORDS_DIR})  # folders whose contents are not checked (run records)

    def foreign(self, files: Iterable[str]) -> list[str]:
        """The relative paths (posix) of `files` that this layout has no place for, sorted."""
        return sorted(rel for rel in files if not self._owns(rel.split("/")))

    def _owns(self, parts: list[str]) -> bool:
        top = parts[0]
        if len(parts) == 1:
            return top in self.top or bool(TMP_LEFTOVER.match(top))
        if top in self.opaque and top in self.top:
            return True
        if top == SHARDS_DIR and top in self.top:
            return len(parts) == 2 and (self.shard_file(parts[1]) or bool(TMP_LEFTOVER.match(parts[1])))
        if top == BUCKETS_DIR and top in self.top:  # buckets/<name>/...: one cache root each
            return len(parts) > 2 and self._owns(parts[2:])
        return False


def is_own_record(text: str | bytes, name: str) -> bool:
    """Is `text` the content of latentforge's file `name` (cache_config.json, buckets.json or _CACHE_COMPLETE): a
    config of its format, or its completion stamp?"""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    return "completed_utc" in data if name == COMPLETE_MARKER else data.get("format") == _FORMATS[name]


def made_by_latentforge(root: CacheRoot, records: Path | None) -> bool:
    """Does `root` (or the build records folder `records` kept for it) hold latentforge's own records?"""
    if records is not None and any((records / name).is_file() for name in (LOCK, RUN_RECORD)):
        return True
    if root.is_url:
        config = root.read_config()
        return config is not None and config.get("format") == _FORMATS[CACHE_CONFIG]
    folder = Path(root.location)
    for name in (*_FORMATS, COMPLETE_MARKER):
        try:
            if is_own_record((folder / name).read_bytes(), name):
                return True
        except OSError:
            continue
    return False


def local_files(folder: Path, opaque: frozenset[str] = frozenset({RUN_RECORDS_DIR})) -> list[str]:
    """Every file and empty folder under `folder` as relative posix paths; the `opaque` top folders (run records)
    count as one entry each."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        rel = Path(dirpath).relative_to(folder)
        if rel == Path("."):
            found += [name for name in dirnames if name in opaque]
            dirnames[:] = [name for name in dirnames if name not in opaque]
        found += [(rel / name).as_posix() for name in filenames]
        if not dirnames and not filenames and rel != Path("."):
            found.append(rel.as_posix())
    return found


def root_files(root: CacheRoot, layout: RootLayout | None) -> list[str]:
    """What `root` holds, as relative paths (nothing when it does not exist yet)."""
    if root.is_url:
        return root.remote_files()
    folder = Path(root.location)
    opaque = layout.opaque if layout is not None else frozenset({RUN_RECORDS_DIR})
    return local_files(folder, opaque) if folder.is_dir() else []


def check_root_is_ours(root: CacheRoot, layout: RootLayout | None, records: Path | None,
                       key: str = "output.root") -> None:
    """ConfigError unless `root` is empty, or made by latentforge and holding nothing its layout has no place for
    (`layout` None: a sink that declares none, whose root is checked for latentforge's records only). `records`: the
    build records folder kept for it (ROOT/build, or a node-local one)."""
    files = root_files(root, layout)
    if not files:
        return
    where = root.location if root.is_url or Path(root.location).is_absolute() else \
        f"{root.location} ({Path(root.location).absolute()})"
    foreign = layout.foreign(files) if layout is not None else []
    if foreign:
        shown = ", ".join(foreign[:_SHOWN]) + (f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else "")
        raise ConfigError(f"{key}={where} holds files latentforge did not write ({shown}); nothing was written. "
                          "Give another --out, or an empty folder")
    if not made_by_latentforge(root, records):
        raise ConfigError(f"{key}={where} is not empty and is not a latentforge cache (no {CACHE_CONFIG} or build "
                          "records of its own); nothing was written. Give another --out, or an empty folder")


def check_not_inside(root: Path, sources: Iterable[str], key: str = "output.root") -> None:
    """ConfigError when the output root is, or holds, one of the dataset's `sources` (files or folders): a cache
    written there would replace the user's data."""
    out = root.resolve()
    for source in sources:
        path = Path(source).resolve()
        if path == out or out in path.parents:
            raise ConfigError(f"{key}={str(root)!r} holds the dataset ({source}); a cache is never written over its "
                              "inputs. Give --out a folder of its own (for example a new folder beside the dataset)")


def fixed_prefix(pattern: str) -> str:
    """The part of a path or glob before its first wildcard: the folder a glob reads from."""
    parts = Path(pattern).parts
    kept = []
    for part in parts:
        if any(c in part for c in "*?["):
            break
        kept.append(part)
    return str(Path(*kept)) if kept else "."
