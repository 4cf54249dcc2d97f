"""What every cache shares on disk, whatever its sink: names and markers, cache_config.json, manifest rows, the
README, the model record, checksums, the root type and the inspect summary."""
