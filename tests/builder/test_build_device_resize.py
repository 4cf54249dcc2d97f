"""A build with frames.resize_backend=device: decode workers ship YUV planes through the frame slots, the rank
converts and resizes them; every row says so, the cache config records the backend, and deep verify (which
re-decodes the sources with the recorded backend and re-encodes them) accepts the cache."""

from __future__ import annotations

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from latentforge.cache.config_file import CacheConfig
from latentforge.verification.deep import verify_deep


def test_device_backend_build_verifies_deep(tmp_path):
    table = write_table(tiny_world(tmp_path / "world", clips=3), tmp_path / "world" / "samples.csv")
    root = tmp_path / "cache"
    # One decode worker: the YUV frames travel through the shared-memory slots as in a GPU build.
    config = tiny_config(table, root, modalities=("rgb",),
                         overrides=("frames.resize_backend=device", "run.workers_per_gpu=1"))
    build_quietly(config)
    rows = read_manifest(root)
    assert rows and all(row["provenance"]["resize_backend"] == "device" for row in rows)
    assert CacheConfig.load(root).frames["resize_backend"] == "device"
    report = verify_deep(root, spot=len(rows))
    assert report.ok, report.failures
    assert report.comparison.startswith("exact")
