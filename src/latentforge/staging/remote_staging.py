"""Staged units at an fsspec URL (output.staging_url: s3://..., gs://..., file://...), so encoder processes on
machines that share no filesystem (Ray workers with node-local disks) stage where the committing process
reads.

Object stores have no rename, so a unit is two objects, written in order: the unit's HDF5 file (staged in a
node-local temp folder first), then its sidecar `unit-N.h5.done.json` (size and SHA-256), last. An earlier
sidecar is deleted before the unit is uploaded again. A unit counts as staged only when its sidecar parses and
the copy the committing process downloads has the size and SHA-256 it records; anything else (an object without
a sidecar, cut short, or changed afterwards) is absent, and the build encodes it again.

Units are looked up by name (the plan says which there should be), never found through a listing: a listing can
be stale (s3fs caches them per filesystem object), and a stale one made a build commit what was staged before it
started. The committing process keeps the downloaded units in its own records folder (`build/staging`), as a
local build would have written them, so the commit itself is the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

from ..config.schema import OutputConfig
from ..errors import DamagedFile, LatentforgeError
from ..hashing import sha256_file
from ..io import canonical_json, write_text_atomic
from ..storage import Storage
from ..testing.fault_points import fault_point
from .staged_unit_writer import write_staged_unit
from .staged_units import completed_units, is_retired, retire_staged_units, sidecar_path, staged_unit_path

CLAIM = "staging.json"  # which build stages under the URL


class RemoteStaging:
    def __init__(self, url: str, storage_options: dict[str, Any] | None = None):
        storage = Storage(url, storage_options, what="output.staging_url=")
        self.url, self.fs, self.root = url, storage.fs, storage.root
        self._path = storage.path

    def claim(self, owner: dict[str, Any], overwrite: bool) -> None:
        """Record which build stages here, or refuse when another one does (a unit of it would be committed as
        one of this build's). With `overwrite`, everything staged here is deleted first."""
        if overwrite and self.fs.exists(self.root):
            self.fs.rm(self.root, recursive=True)
        self.fs.makedirs(self.root, exist_ok=True)  # a local folder (file://) must exist; no-op on object stores
        try:
            found = json.loads(self.fs.cat_file(self._path(CLAIM)))
        except FileNotFoundError:
            self.fs.pipe_file(self._path(CLAIM), canonical_json(owner).encode("utf-8"))
            return
        except ValueError as error:  # not JSON: which build staged here is unknown, so none of it may be committed
            raise DamagedFile(self._path(CLAIM), str(error), "it says which build stages under this URL; rerun with "
                              "--overwrite to start over (it deletes what is staged there)") from None
        if found == owner:
            return
        if isinstance(found, dict) and found.get("root") == owner["root"]:
            raise LatentforgeError(f"output.staging_url={self.url!r} holds units this root's build staged with other "
                                   "settings; rerun with --overwrite to start over, or use the settings it started "
                                   "with")
        theirs = found.get("root") if isinstance(found, dict) else None
        raise LatentforgeError(f"output.staging_url={self.url!r} holds the units of the build of output.root "
                               f"{theirs!r}; give each build its own staging URL")

    def put(self, unit_file: Path) -> None:
        """Upload a staged unit and its sidecar, the sidecar last."""
        sidecar = sidecar_path(unit_file)
        try:  # it must never vouch for the object being replaced (asked directly: `exists` may answer from a cache)
            self.fs.rm_file(self._path(sidecar.name))
        except FileNotFoundError:
            pass
        self.fs.put_file(str(unit_file), self._path(unit_file.name))
        fault_point("upload")  # test-only: a kill here leaves a unit object without its sidecar
        self.fs.pipe_file(self._path(sidecar.name), sidecar.read_bytes())

    def remove(self, unit_files: Iterable[Path]) -> None:
        """Delete staged units here once their commit is verified, each sidecar first (a unit cut short in between
        counts as absent, which a build whose commit holds the unit never asks about again)."""
        for unit_file in unit_files:
            for name in (sidecar_path(unit_file).name, unit_file.name):
                try:
                    self.fs.rm_file(self._path(name))
                except FileNotFoundError:
                    pass

    def pull(self, build_dir: Path, units: Iterable[int]) -> None:
        """Download into build_dir/staging every one of `units` staged here that the local copy lacks or disagrees
        with, each found by its own sidecar's name."""
        names = {self._path(sidecar_path(staged_unit_path(build_dir, unit)).name): unit for unit in sorted(units)}
        if not names:
            return
        self.fs.invalidate_cache(self.root)
        found = self.fs.cat(list(names), on_error="return")  # fetched together; a missing one maps to its error
        for path, unit in names.items():
            data = found.get(path)
            if not isinstance(data, bytes):  # not staged (yet)
                continue
            try:
                done = json.loads(data)
                size, digest = int(done["size"]), str(done["sha256"])
            except (ValueError, KeyError, TypeError):  # torn or foreign: the unit is absent
                continue
            local = staged_unit_path(build_dir, unit)
            if not _local_copy_matches(local, size, digest):
                self._download(local.name, local, size, digest)

    def _download(self, unit_name: str, local: Path, size: int, digest: str) -> None:
        """The unit as build_dir/staging holds it, sidecar last; a copy without the sidecar's SHA-256 (changed
        after its sidecar was written) is dropped, so the unit counts as absent."""
        sidecar_path(local).unlink(missing_ok=True)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.tmp{os.getpid()}")  # removed by a rerun if this process dies
        try:
            try:
                self.fs.get_file(self._path(unit_name), str(tmp))
            except FileNotFoundError:  # a sidecar left without its object: absent
                return
            if tmp.stat().st_size != size or sha256_file(tmp) != digest:
                return
            os.replace(tmp, local)
        finally:
            tmp.unlink(missing_ok=True)
        write_text_atomic(sidecar_path(local), canonical_json({"size": size, "sha256": digest}))


def _local_copy_matches(local: Path, size: int, digest: str) -> bool:
    try:
        done = json.loads(sidecar_path(local).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return done == {"sha256": digest, "size": size} and local.is_file() and local.stat().st_size == size


_OPENED: dict[tuple[int, str], RemoteStaging] = {}


def _staging(url: str) -> RemoteStaging:
    """One store per process and URL: opening an S3 client costs about as much as staging a small unit."""
    key = (os.getpid(), url)
    if key not in _OPENED:
        _OPENED[key] = RemoteStaging(url)
    return _OPENED[key]


def claim_staging(output: OutputConfig, key: dict[str, Any], overwrite: bool) -> None:
    """Claim output.staging_url for the build of `output.root` with the resume `key` (builder/resume.py)."""
    if output.staging_url:
        digest = hashlib.sha256(canonical_json(key).encode("utf-8")).hexdigest()
        _staging(output.staging_url).claim({"root": output.root, "key_sha256": digest}, overwrite)


def stage_unit(build_dir: Path, staging_url: str, unit: int, *arrays: Any, **named: Any) -> None:
    """write_staged_unit into build_dir/staging, or, with `staging_url`, through a node-local temp folder to
    that URL (the build folder may not exist on this machine)."""
    if not staging_url:
        write_staged_unit(build_dir, unit, *arrays, **named)
        return
    with tempfile.TemporaryDirectory(prefix="latentforge-unit-") as tmp:
        _staging(staging_url).put(write_staged_unit(Path(tmp), unit, *arrays, **named))


def retire_units(build_dir: Path, staging_url: str) -> None:
    """After a verified commit: the staged units give way to records of their rows (staging/staged_units.py), and with
    `staging_url` their objects there are deleted."""
    staged = [path for path in completed_units(build_dir).values() if not is_retired(path)]
    retire_staged_units(build_dir)
    if staging_url:
        _staging(staging_url).remove(staged)


def staged_units(build_dir: Path, staging_url: str, units: Iterable[int]) -> dict[int, Path]:
    """{unit: local staged file} of every completed unit; with `staging_url`, those of `units` (the plan's) staged
    there are downloaded into build_dir/staging first."""
    if staging_url:
        _staging(staging_url).pull(build_dir, units)
    return completed_units(build_dir)
