"""The reader interface: what a dataset reader claims, the entries it lists, its own keys and config checks, and
where its samples' text side files (Cosmos T5 pickles) are. A reader is a subclass registered by name (registry kind
"reader"); nothing outside readers/ branches on a reader's name."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..config import DatasetConfig
from ..config.schema import NoOptions
from ..errors import ConfigError
from ..records import Reject, Sample, SourceEntry

if TYPE_CHECKING:
    from ..config.schema import BuildConfig


class Reader:
    name: ClassVar[str]  # its registry name: what dataset.reader names and the cache records
    # The modalities it lists sources for; the others of modalities.names are refused before any work.
    modalities: ClassVar[tuple[str, ...]] = ("rgb",)
    # Its own keys in the dataset section (dataset.KEY), a dataclass parsed by config/loading/backend_options.py.
    options_class: ClassVar[type] = NoOptions
    # How to make a missing pickle, in a `bad_text_pickle` reject's detail (text.source=pickles).
    pickle_fix: ClassVar[str] = ("write it with `latentforge cosmos t5 DATASET_DIR --t5 PATH`, or use "
                                 "text.source=pickles+encoder")

    def __init__(self, config: DatasetConfig):
        self.config = config
        # What the listing names but cannot be used (a clip whose metadata is broken): plan rejects, filled in by
        # entries() of a reader that finds such things, and added to the plan's rejects.
        self.rejects: list[Reject] = []

    @classmethod
    def claims(cls, paths: list[str]) -> bool:
        """dataset.reader=auto: is dataset.path something this reader reads?"""
        return False

    def entries(self) -> list[SourceEntry]:
        """Every sample of the listing, in any order (the plan sorts them)."""
        raise NotImplementedError

    @classmethod
    def recorded_keys(cls, options) -> dict[str, Any]:
        """Its own keys as cache_config.json and the resume key record them (a reader may leave out keys at a
        default that caches built before the key existed did not record)."""
        return dataclasses.asdict(options) if dataclasses.is_dataclass(options) else {}

    @classmethod
    def check_config(cls, config: BuildConfig) -> None:
        """Its part of the config checks: the modalities it can provide, then its own keys."""
        unsupported = [m for m in config.modalities.names if m not in cls.modalities]
        if unsupported:
            raise ConfigError(f"the {cls.name} reader provides {', '.join(cls.modalities)} only, not "
                              f"{', '.join(unsupported)}; use a reader that lists mask and depth sources (dataset."
                              f"reader=table with mask_column/depth_column) for modalities {config.modalities.names!r}")

    # ------------------------------------------------------------------ text side files (text.source=pickles)
    @classmethod
    def pickle_lookup_rule(cls, config: BuildConfig) -> str:
        """Where a sample's Cosmos T5 pickle is, in words, as cache_config.json records it."""
        raise ConfigError(f"the {cls.name} reader has no Cosmos T5 pickles; set text.source=encoder")

    @classmethod
    def pickle_path(cls, sample: Sample, config: BuildConfig) -> Path | None:
        """The sample's pickle path (it may not exist), or None when the listing names none for it."""
        raise ConfigError(f"the {cls.name} reader has no Cosmos T5 pickles; set text.source=encoder")
