"""Feeding training from a latent cache: cache_dataset for any sink, the HDF5 and WebDataset sinks' Datasets under
their public names, samplers, collate, expectations, the Cosmos-Predict2 adapter."""

from ..cache.expect import CacheExpectation, CacheMismatch
from ..sinks.hdf5.bucketed_dataset import BucketedLatentDataset
from ..sinks.hdf5.dataset import LatentCacheDataset
from ..sinks.hdf5.roots import ROOT_ENV, ROOT_ENV_ALIAS, resolve_cache_root
from ..sinks.webdataset.dataset import StreamingLatentDataset
from .bucket_sampler import BucketBatchSampler
from .cache_dataset import cache_dataset
from .collate import collate_latent_batch, drop_captions
from .cosmos_adapter import LATENT_KEY, CosmosVideo2WorldDataset
from .sampler import ResumableSampler
from .synthetic_cache import SyntheticCacheSpec, write_synthetic_cache

__all__ = [
    "LATENT_KEY",
    "ROOT_ENV",
    "ROOT_ENV_ALIAS",
    "BucketBatchSampler",
    "BucketedLatentDataset",
    "CacheExpectation",
    "CacheMismatch",
    "CosmosVideo2WorldDataset",
    "LatentCacheDataset",
    "ResumableSampler",
    "StreamingLatentDataset",
    "SyntheticCacheSpec",
    "cache_dataset",
    "collate_latent_batch",
    "drop_captions",
    "resolve_cache_root",
    "write_synthetic_cache",
]
