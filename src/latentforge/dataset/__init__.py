"""Feeding training from a latent cache: dataset, sampler, collate, expectations, Cosmos-Predict2 adapter."""

from .cache_info import ROOT_ENV, ROOT_ENV_ALIAS, resolve_cache_root
from .collate import collate_latent_batch, drop_captions
from .cosmos_adapter import LATENT_KEY, CosmosVideo2WorldDataset
from .demo_cache import DemoCacheSpec, write_demo_cache
from .expect import CacheExpectation, CacheMismatch
from .latent_dataset import LatentCacheDataset
from .sampler import ResumableSampler

__all__ = [
    "LATENT_KEY",
    "ROOT_ENV",
    "ROOT_ENV_ALIAS",
    "CacheExpectation",
    "CacheMismatch",
    "CosmosVideo2WorldDataset",
    "DemoCacheSpec",
    "LatentCacheDataset",
    "ResumableSampler",
    "collate_latent_batch",
    "drop_captions",
    "resolve_cache_root",
    "write_demo_cache",
]
