"""The pre-build size estimate counts the per-frame side streams (float32 [num_frames, D] per row and stream): held
against the bytes of a built cache whose side stream outweighs everything else, measured with os.stat and h5py."""

from __future__ import annotations

import os

import h5py
import numpy as np

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from latentforge.builder.estimate import estimate_output_bytes, output_shapes, side_values

WIDE = 40_000  # values per frame: 2 rows x 9 frames x 40000 x 4 B = 2.9 MB, more than the rest of the cache


def _cache_bytes(root) -> int:
    """Every file of the cache, build records left out (they are not part of what the estimate sizes)."""
    return sum(os.path.getsize(os.path.join(folder, name)) for folder, dirs, names in os.walk(root)
               if "build" not in os.path.relpath(folder, root).split(os.sep) for name in names)


def test_the_estimate_bounds_a_cache_with_a_wide_side_stream(tmp_path):
    folder = tmp_path / "world"
    rows = tiny_world(folder, clips=3)[:2]  # the last clip is too short for a window
    table_rows = []
    for number, row in enumerate(rows):
        times = np.arange(16) / 10.0
        np.save(folder / f"feat{number}.npy", np.random.default_rng(number).standard_normal((16, WIDE)))
        np.save(folder / f"feat{number}.times.npy", times)
        table_rows.append({**row, "feat": f"feat{number}.npy"})
    table = write_table(table_rows, folder / "table.csv")
    root = tmp_path / "cache"
    config = tiny_config(table, root, modalities=("rgb",),
                         overrides=("dataset.side_columns=feat", f"dataset.side_dims={WIDE}"))
    build_quietly(config)
    manifest = read_manifest(root)
    n = len(manifest)
    assert n == 2

    assert side_values(config) == (9 * WIDE, 1)
    latent, text = output_shapes(config)
    storage = config.output.storage_dtype
    per_shard = config.output.rows_per_shard
    with_side = estimate_output_bytes(n, latent, text, storage, rows_per_shard=per_shard, side=side_values(config))
    without = estimate_output_bytes(n, latent, text, storage, rows_per_shard=per_shard)

    stored_side = 0
    for shard_path in sorted({row["shard_path"] for row in manifest}):
        with h5py.File(root / shard_path, "r") as shard:
            stored_side += shard["feat"].id.get_storage_size()
    assert stored_side == n * 9 * WIDE * 4  # h5py's count of the side stream's data bytes: float32, uncompressed
    assert with_side - without == n * (9 * WIDE * 4 + 64)  # its data and one chunk index entry per row

    size = _cache_bytes(root)
    assert without < size  # leaving the side stream out undercounts this cache
    assert size < with_side < size + n * 4096 + (2 << 20)  # an upper bound, not a wild one (as for latents)
