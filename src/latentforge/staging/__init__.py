"""What every sink's commit starts from: staged units, byte-stable HDF5, and the staged rows gathered against the
plan (the commits themselves live in sinks/)."""
