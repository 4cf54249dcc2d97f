"""The default sink: sharded HDF5 in a local folder, with its commit, integrity verify, inspect and Datasets."""

NAME = "hdf5"  # its registry name (what output.sink names; a cache it wrote records no "sink" section)
