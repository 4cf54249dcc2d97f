"""What a deep verify or a preview needs to redo a build's work: the build's config, its tokenizer, and each
sample's frames exactly as the manifest records them (docs/verify.md).

The config comes from ROOT/build/run.json (the full build config) when present and intact, else from what
cache_config.json records; the user may point it at a moved dataset, checkpoint or text model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from .. import registry
from ..cache.build_records import build_config_data
from ..cache.conditioning_streams import CLIP_IMAGE_EMBEDS
from ..cache.config_file import CacheConfig
from ..cache.layout import RUN_RECORD, RUN_RECORDS_DIR
from ..cache.rows import ManifestRow
from ..config import BuildConfig
from ..config.loading import load_config
from ..config.option_roles import EXECUTION, keys_with_role
from ..devices import default_device
from ..errors import ConfigError, DamagedFile
from ..pipeline.plan import first_entries, read_plan
from ..pipeline.probe import probe_sample
from ..pipeline.run_record import read_run_record
from ..pipeline.sample import SamplePixels, load_sample_pixels, provenance_of
from ..pipeline.side_streams import probe_side_streams
from ..records import Sample, SourceEntry
from ..tokenizers.base import Tokenizer
from ..transforms.window import FrameWindow


@dataclass(frozen=True)
class Overrides:
    """What the user passes again because it moved or lives elsewhere on this machine."""

    dataset: tuple[str, ...] = ()  # replaces dataset.path (table files or the Cosmos folder)
    tokenizer_checkpoint: str | None = None
    text_path: str | None = None
    device: str = field(default_factory=default_device)  # a GPU when torch sees one
    image_encoder_path: str | None = None  # replaces conditioning.image_encoder_path


def recorded_config(root: Path, overrides: Overrides) -> BuildConfig:
    """The config the cache was built with, with the user's paths and device applied."""
    root = Path(root)
    cache_config = CacheConfig.load(root)
    try:
        record, unread = read_run_record(root / RUN_RECORDS_DIR), "has no"
    except DamagedFile:  # what it held is what cache_config.json records, less the dataset's location
        record, unread = None, "has a damaged"
    data = record["key"]["config"] if record is not None else build_config_data(cache_config)
    # execution settings the fingerprint records (run.json of early versions left them out): run as built
    backend = registry.resolve("tokenizer", data["tokenizer"]["name"])
    for key in sorted(keys_with_role(backend.options_class, EXECUTION)):
        if cache_config.tokenizer.get(key) is not None:
            data["tokenizer"][key] = cache_config.tokenizer[key]
    if isinstance(data.get("text"), dict):  # recorded by versions that still had it; the rows do not depend on it
        data["text"].pop("batch_size", None)
    data["output"] = {**data.get("output", {}), "root": str(root)}
    data["run"] = {**data.get("run", {}), "device": overrides.device}
    if overrides.dataset:
        data["dataset"]["path"] = list(overrides.dataset)
    if not data["dataset"].get("path"):
        raise ConfigError(f"{root} {unread} {RUN_RECORDS_DIR}/{RUN_RECORD}, so the dataset location is unknown; "
                          "pass it with --dataset")
    if overrides.tokenizer_checkpoint:
        data["tokenizer"]["checkpoint"] = overrides.tokenizer_checkpoint
    if overrides.text_path:
        data["text"]["path"] = overrides.text_path
    _pin_image_encoder(data, cache_config, overrides.image_encoder_path)
    return load_config(extra=data)


def _pin_image_encoder(data: dict, cache_config: CacheConfig, path: str | None) -> None:
    """The image encoder at `path` (when given), held to the checkpoint SHA-256 its stream's producer records, as
    the tokenizer is held to cache_config.json's: another file at the old path or the new one is refused before
    its weights are read."""
    section = cache_config.conditioning
    if section is None or not isinstance(data.get("conditioning"), dict):
        return
    if path:
        data["conditioning"]["image_encoder_path"] = path
    recorded = next((s.producer.get("checkpoint_sha256") for s in section.streams if s.name == CLIP_IMAGE_EMBEDS),
                    None)
    if recorded:
        data["conditioning"]["image_encoder_sha256"] = recorded


def load_recorded_tokenizer(config: BuildConfig, cache_config: CacheConfig) -> Tokenizer:
    """The build's tokenizer on config.run.device; a checkpoint whose SHA-256 is not the one cache_config.json
    records is refused by the backend before its weights are read."""
    cfg = config.tokenizer
    if cache_config.checkpoint_sha256:
        cfg = dataclasses.replace(cfg, sha256=cache_config.checkpoint_sha256)
    return registry.resolve("tokenizer", cfg.name).from_config(cfg, config.run.device)


class SampleFinder:
    """Each manifest row's Sample: from build/plan.jsonl, or from re-reading the dataset listing when the user
    gave a new dataset location or the plan is missing (a fetched cache has no build/); a listing that names an id
    twice gives the row the build kept (the first, as the plan takes it)."""

    def __init__(self, root: Path, config: BuildConfig, reread: bool):
        try:
            self._plan = read_plan(Path(root) / RUN_RECORDS_DIR)
        except DamagedFile:  # the plan is made from the listing, as for a fetched cache
            self._plan = {}
        self._entries: dict[str, SourceEntry] | None = None
        if reread or not self._plan:
            reader = registry.resolve("reader", config.dataset.reader)(config.dataset)
            self._entries = {entry.key: entry for entry in first_entries(reader.entries())[0]}

    def sample(self, row: ManifestRow) -> Sample:
        planned = self._plan.get(row.sample_id)
        start = planned.start_frame if planned else None
        if self._entries is None and planned is not None:
            return Sample(row.sample_id, row.source_index, planned.entry, start)
        key = planned.entry.key if planned else row.sample_id
        entries = self._entries or {}
        if key not in entries and "@" in key:
            key = key.rsplit("@", 1)[0]  # a window suffix: <key>@<start_frame>
        if key not in entries:
            raise ConfigError(f"dataset_index {row.dataset_index}: sample {row.sample_id!r} is not in the "
                              "dataset listing; pass the dataset the cache was built from with --dataset")
        return Sample(row.sample_id, row.source_index, entries[key], start)


def recorded_pixels(row: ManifestRow, sample: Sample, config: BuildConfig) -> tuple[SamplePixels, list[str]]:
    """The frames at the manifest's recorded frame indices, decoded from each video's start, and how the recorded
    provenance differs from what the sources and config give today (empty when they agree). Raises
    SampleRejected when a source fails."""
    recorded = row.provenance
    probe = probe_sample(sample, config)
    fresh = provenance_of(probe)
    differences = [f"{key} recorded {recorded.get(key)!r}, sources give {value!r}"
                   for key, value in fresh.items() if recorded.get(key) != value]
    if probe.caption != row.prompt:
        differences.append(f"prompt recorded {row.prompt!r}, sources give {probe.caption!r}")
    window = FrameWindow(tuple(row.frame_indices), tuple(row.timestamps))
    # the side streams' rows at the recorded frame times, by the build's rule
    side = probe_side_streams(sample, config, probe.info, window)
    # From each stream's start, never seeking: a seek defect in the build's path cannot verify itself
    pixels = load_sample_pixels(sample, dataclasses.replace(probe, window=window, side=side), config, from_start=True)
    for modality in ("mask", "depth", "side"):
        if modality in pixels.provenance and pixels.provenance[modality] != recorded.get(modality):
            differences.append(f"{modality} recorded {recorded.get(modality)!r}, sources give "
                               f"{pixels.provenance[modality]!r}")
    return pixels, differences
