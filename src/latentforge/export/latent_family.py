"""Which export targets can take a cache: each target declares the latent families its trainer reads, and a cache's
family is its tokenizer's `latent_family`, found through the registry from the name cache_config.json records, so
no backend is named here. A cache of another family is refused before anything is written, naming its tokenizer
and the targets that take it: written under another model's names, its latents would train that model on
numbers it never saw."""

from __future__ import annotations

from pathlib import Path

from .. import registry
from ..cache.config_file import CacheConfig
from ..errors import ConfigError
from .targets import TARGETS


def latent_family(config: CacheConfig) -> str:
    """The family of the tokenizer that encoded the cache ("" where no trainer's format is known to read it)."""
    return registry.resolve("tokenizer", str(config.tokenizer_name)).latent_family


def check_target_takes(root: Path, config: CacheConfig, target: str) -> None:
    families = TARGETS[target].families
    family = latent_family(config)
    if families is None or family in families:
        return
    takers = [name for name, each in TARGETS.items() if each.families is None or family in each.families]
    described = f"latent family {family}" if family else "no trainer's latent family"
    raise ConfigError(f"{root} was encoded by the {config.tokenizer_name} tokenizer ({described}); the {target} "
                      f"target writes {' or '.join(sorted(families))} latents only. Targets that take this cache: "
                      f"{', '.join(takers)}")
