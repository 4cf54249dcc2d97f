"""WebDataset caches: a commit that writes tar shards straight to a store URL, and a streaming training reader."""

from .commit import WebDatasetCommit, WebDatasetOptions, commit_webdataset
from .reader import StreamingLatentDataset

__all__ = ["StreamingLatentDataset", "WebDatasetCommit", "WebDatasetOptions", "commit_webdataset"]
