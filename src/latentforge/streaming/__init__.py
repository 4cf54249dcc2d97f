"""WebDataset caches under their public name: a commit that writes tar shards straight to a store URL, and a
streaming training reader (the sink itself is sinks/webdataset/)."""

from ..sinks.webdataset.commit import WebDatasetCommit, WebDatasetOptions, commit_webdataset
from ..sinks.webdataset.dataset import StreamingLatentDataset

__all__ = ["StreamingLatentDataset", "WebDatasetCommit", "WebDatasetOptions", "commit_webdataset"]
