"""The webdataset sink: tar shards at a local folder or an fsspec URL, committed straight there and streamed back."""
