"""Writing a cache: staged units, byte-stable HDF5, and the commit that turns staged units into a cache."""
