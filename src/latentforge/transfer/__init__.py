"""Publishing a finished cache to object storage (`publish`) and bringing one back (`fetch`)."""

from .destinations import Destination, TransferEvent
from .fetch import FetchOptions, FetchReport, fetch
from .publish import DestinationReport, PublishOptions, PublishReport, publish

__all__ = [
    "Destination",
    "DestinationReport",
    "FetchOptions",
    "FetchReport",
    "PublishOptions",
    "PublishReport",
    "TransferEvent",
    "fetch",
    "publish",
]
