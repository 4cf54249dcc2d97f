"""Cache formats, one folder each (hdf5/, webdataset/): commit and read side together, behind sinks/base.Sink."""
