"""Two versions of one cache, as a user makes them: v1 built, v2 a copy of it grown by `build --extend` (HDF5, a
WebDataset folder, a bucketed root); and what a published copy of one holds, read with plain file and tar tools."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from helpers.bucket_world import bucket_config
from helpers.builds import table_subset
from helpers.exec_world import exec_config, make_table
from latentforge.builder.run import build

_BASE_IDS = ("clip000", "clip002", "clip004", "clip005")  # the union of 7 adds clip001, clip003, clip006
_BUCKET_BASE_IDS = ("landscape", "near_square", "portrait", "portrait_rotated", "square")
_WDS_SAMPLE_BYTES = 16 * 3 * 4 * 6 * 2  # haar-4x8x8's float16 latent of 9 frames of 32x48; no text


def hdf5_versions(folder: Path) -> tuple[Path, Path]:
    """4 rows in two shards, then 7 in four: v1's shard names are gone from v2 (they carry the shard count)."""
    union = make_table(folder / "data", count=7)
    build(exec_config(table_subset(union, "base.csv", _BASE_IDS), folder / "v1", "output.rows_per_shard=2"), quiet=True)
    shutil.copytree(folder / "v1", folder / "v2")
    build(exec_config(union, folder / "v2", "output.rows_per_shard=2"), quiet=True, extend=True)
    return folder / "v1", folder / "v2"


def webdataset_versions(folder: Path) -> tuple[Path, Path]:
    """Tars of 3 samples: v1's last tar (one sample) is written again under a new name in v2, its full tar kept."""
    union = make_table(folder / "data", count=7)

    def config(table: Path, version: str):
        return exec_config(table, folder / version, "output.sink=webdataset",
                           f"output.shard_bytes={3 * _WDS_SAMPLE_BYTES}",
                           f"output.staging_dir={folder / f'{version}-records'}")

    build(config(table_subset(union, "base.csv", _BASE_IDS), "v1"), quiet=True)
    shutil.copytree(folder / "v1", folder / "v2")
    shutil.copytree(folder / "v1-records", folder / "v2-records")
    build(config(union, "v2"), quiet=True, extend=True)
    return folder / "v1", folder / "v2"


def bucketed_versions(table: Path, t5: Path, folder: Path) -> tuple[Path, Path]:
    """Buckets that grow (their last shard renamed), one that stays, one that is new in v2."""
    build(bucket_config(table_subset(table, "republish-base.csv", _BUCKET_BASE_IDS), t5, folder / "v1"), quiet=True)
    shutil.copytree(folder / "v1", folder / "v2")
    build(bucket_config(table, t5, folder / "v2"), quiet=True, extend=True)
    return folder / "v1", folder / "v2"


def cache_objects(root: Path) -> dict[str, bytes]:
    """What publish sends: every file under ROOT but build records and _SUCCESS, by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "build" not in p.relative_to(root).parts and p.name != "_SUCCESS"}


def folder_objects(folder: Path) -> dict[str, bytes]:
    """Every file under a published folder but _SUCCESS."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).as_posix() != "_SUCCESS"}


def sha256sum_c(folder: Path) -> None:
    """`sha256sum -c` of the folder's SHA256SUMS and of each bucket's; CalledProcessError naming what fails."""
    for listing in [folder / "SHA256SUMS", *sorted(folder.glob("buckets/*/SHA256SUMS"))]:
        subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=listing.parent, check=True,
                       capture_output=True)
