"""The cache on disk, in one place: names and markers, cache_config.json, manifest rows, the README, the
model record, checksums, inspect and the integrity check."""
