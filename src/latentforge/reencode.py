"""What a deep verify needs to redo a build's work: the build's config, each sample's frames exactly as the
manifest records them, and the rule that compares a fresh encoding with a stored one (docs/verify.md).

The config comes from ROOT/build/run.json (the full build config) when present, else from what
cache_config.json records; the user may point it at a moved dataset, checkpoint or text model.
"""

from __future__ import annotations

import dataclasses
import json
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from . import __version__, registry
from .config import BuildConfig, load_config
from .errors import ConfigError
from .probe import probe_sample
from .records import Sample, SamplePixels, SourceEntry
from .samples import load_sample_pixels, provenance_of
from .tokenizers.base import Tokenizer
from .transforms.window import FrameWindow

RUN_RECORD = "build/run.json"
PLAN_RECORD = "build/plan.jsonl"
# Relative-L2 tolerance of a re-encode in another environment, per precision mode, plus the storage cast:
# one float16 rounding step moves a value by at most 2^-10 of itself, so it moves rel-L2 by at most 2^-10.
PRECISION_TOLERANCE = {"fp32": 1e-5, "bf16": 2e-2, "cosmos-bf16": 2e-2}
STORAGE_TOLERANCE = {"float16": 2.0**-10, "float32": 0.0}
PROVENANCE_KEYS = ("frame_indices", "timestamps", "source_fps", "source_size", "rotation", "crop_box")


@dataclass(frozen=True)
class Overrides:
    """What the user passes again because it moved or lives elsewhere on this machine."""

    dataset: tuple[str, ...] = ()  # replaces dataset.path (table files or the Cosmos folder)
    tokenizer_checkpoint: str | None = None
    text_path: str | None = None
    device: str = "cpu"


def _config_from_cache_config(cache_config: dict[str, Any]) -> dict[str, Any]:
    """The build config as far as cache_config.json records it (no paths: those come from overrides)."""
    text = cache_config["text"]
    frames = {k: v for k, v in cache_config["frames"].items() if k != "pixel_range"}
    modalities = {k: v for k, v in cache_config["modalities"].items() if v is not None}
    tokenizer = cache_config["tokenizer"]
    return {
        "preset": cache_config.get("preset"),
        "dataset": dict(cache_config["dataset"]),
        "frames": frames,
        "modalities": modalities,
        "tokenizer": {"name": tokenizer["name"], "precision": tokenizer.get("precision", "fp32")},
        "text": {"name": "none"} if text is None else {
            "name": text["name"], "max_length": text["max_length"], "empty_prompt": text["empty_prompt"],
            "precision": text.get("precision", "fp32")},
        "output": {"latent_dataset": cache_config["latent"]["dataset"], "rows_per_shard": cache_config["rows_per_shard"],
                   "storage_dtype": cache_config["storage_dtype"], "unit_size": cache_config["build"]["unit_size"],
                   "batch_size": cache_config["build"]["batch_size"]},
        "run": {"seed": cache_config["build"]["seed"]},
    }


def recorded_config(root: Path, overrides: Overrides) -> BuildConfig:
    """The config the cache was built with, with the user's paths and device applied."""
    root = Path(root)
    run_record = root / RUN_RECORD
    if run_record.is_file():
        data = json.loads(run_record.read_text(encoding="utf-8"))["key"]["config"]
    else:
        data = _config_from_cache_config(json.loads((root / "cache_config.json").read_text(encoding="utf-8")))
    recorded_tokenizer = json.loads((root / "cache_config.json").read_text(encoding="utf-8"))["tokenizer"]
    for key in ("temporal_window", "max_gpu_mem_gib"):  # execution settings run.json leaves out: run as built
        if recorded_tokenizer.get(key) is not None:
            data["tokenizer"][key] = recorded_tokenizer[key]
    data["output"] = {**data.get("output", {}), "root": str(root)}
    data["run"] = {**data.get("run", {}), "device": overrides.device}
    if overrides.dataset:
        data["dataset"]["path"] = list(overrides.dataset)
    if not data["dataset"].get("path"):
        raise ConfigError(f"{root} has no {RUN_RECORD}, so the dataset location is unknown; pass it with --dataset")
    if overrides.tokenizer_checkpoint:
        data["tokenizer"]["checkpoint"] = overrides.tokenizer_checkpoint
    if overrides.text_path:
        data["text"]["path"] = overrides.text_path
    return load_config(extra=data)


def load_recorded_tokenizer(config: BuildConfig, cache_config: dict[str, Any]) -> Tokenizer:
    """The build's tokenizer on config.run.device; a checkpoint whose SHA-256 is not the one cache_config.json
    records is refused by the backend before its weights are read."""
    cfg = config.tokenizer
    if cache_config["tokenizer"].get("checkpoint_sha256"):
        cfg = dataclasses.replace(cfg, sha256=cache_config["tokenizer"]["checkpoint_sha256"])
    return registry.resolve("tokenizer", cfg.name).from_config(cfg, config.run.device)


class SampleFinder:
    """Each manifest row's Sample: from build/plan.jsonl, or from re-reading the dataset listing when the user
    gave a new dataset location or the plan is missing (a fetched cache has no build/)."""

    def __init__(self, root: Path, config: BuildConfig, reread: bool):
        self._plan: dict[str, dict[str, Any]] = {}
        self._entries: dict[str, SourceEntry] | None = None
        plan = Path(root) / PLAN_RECORD
        if plan.is_file():
            with open(plan, encoding="utf-8") as handle:
                self._plan = {row["sample_id"]: row for row in map(json.loads, handle)}
        if reread or not self._plan:
            reader = registry.resolve("reader", config.dataset.reader)(config.dataset)
            self._entries = {entry.key: entry for entry in reader.entries()}

    def sample(self, row: dict[str, Any]) -> Sample:
        planned = self._plan.get(row["sample_id"])
        start = planned["start_frame"] if planned else None
        if self._entries is None and planned is not None:
            entry = SourceEntry(planned["key"], planned["video"], planned["video_rel"], planned["caption"],
                                planned["mask"], planned["depth"], planned["extra"])
            return Sample(row["sample_id"], row["source_index"], entry, start)
        key = planned["key"] if planned else row["sample_id"]
        entries = self._entries or {}
        if key not in entries and "@" in key:
            key = key.rsplit("@", 1)[0]  # a window suffix (DESIGN §2)
        if key not in entries:
            raise ConfigError(f"dataset_index {row['dataset_index']}: sample {row['sample_id']!r} is not in the "
                              "dataset listing; pass the dataset the cache was built from with --dataset")
        return Sample(row["sample_id"], row["source_index"], entries[key], start)


def recorded_pixels(row: dict[str, Any], sample: Sample, config: BuildConfig) -> tuple[SamplePixels, list[str]]:
    """The frames at the manifest's recorded frame indices, and how the recorded provenance differs from what
    the sources and config give today (empty when they agree). Raises SampleRejected when a source fails."""
    recorded = row["provenance"]
    probe = probe_sample(sample, config)
    fresh = provenance_of(probe)
    differences = [f"{key} recorded {recorded.get(key)!r}, sources give {fresh[key]!r}"
                   for key in PROVENANCE_KEYS if recorded.get(key) != fresh[key]]
    if probe.caption != row["prompt"]:
        differences.append(f"prompt recorded {row['prompt']!r}, sources give {probe.caption!r}")
    window = FrameWindow(tuple(recorded["frame_indices"]), tuple(recorded["timestamps"]))
    pixels = load_sample_pixels(sample, dataclasses.replace(probe, window=window), config)
    for modality in ("mask", "depth"):
        if modality in pixels.provenance and pixels.provenance[modality] != recorded.get(modality):
            differences.append(f"{modality} recorded {recorded.get(modality)!r}, sources give "
                               f"{pixels.provenance[modality]!r}")
    return pixels, differences


# ------------------------------------------------------------------------------------------- comparing


def environment_record(device: str | torch.device) -> dict[str, str]:
    """What decides whether a re-encode can be bit-exact: device model and software (no host names, no time)."""
    device = torch.device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")),
                    platform.processor() or platform.machine())
    return {"device_type": device.type, "device_name": name, "torch": torch.__version__, "latentforge": __version__}


def _cpuinfo() -> Iterator[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            yield from handle
    except OSError:
        return


def build_environment(root: Path) -> tuple[dict[str, str] | None, str]:
    """The environment every run of the build recorded (`environment` in build/stats-*.json), or None and why."""
    runs = sorted((Path(root) / "build").glob("stats-*.json"))
    recorded = [json.loads(path.read_text(encoding="utf-8")).get("environment") for path in runs]
    if not recorded or any(env is None for env in recorded):
        return None, "the build did not record its environment (build/stats-*.json has no 'environment')"
    if any(env != recorded[0] for env in recorded):
        return None, "the build's runs (resumes) ran in different environments"
    return recorded[0], "recorded"


@dataclass(frozen=True)
class Comparison:
    """Exactly equal after the storage cast, or relative L2 within `tolerance`."""

    exact: bool
    tolerance: float
    why: str

    def describe(self) -> str:
        how = "exact (bit for bit after the storage cast)" if self.exact else f"rel-L2 <= {self.tolerance:.3g}"
        return f"{how}: {self.why}"

    def problem(self, stored: np.ndarray, fresh: np.ndarray) -> str | None:
        """None when `fresh` matches `stored`, else what differs."""
        a, b = stored.astype(np.float64), fresh.astype(np.float64)
        if a.shape != b.shape:
            return f"shape {list(a.shape)} stored, {list(b.shape)} re-encoded"
        differs = a != b
        if not differs.any():
            return None
        rel = float(np.linalg.norm(a - b) / max(np.linalg.norm(b), np.finfo(np.float64).tiny))
        if not self.exact and rel <= self.tolerance:
            return None
        first = tuple(int(v) for v in np.argwhere(differs)[0])
        return (f"{int(differs.sum())} values differ (rel-L2 {rel:.3g}, max |diff| {np.abs(a - b).max():.4g}; first at "
                f"[c,t,y,x]={list(first)}: stored {a[first]:.6g}, re-encoded {b[first]:.6g})")


def tolerance_for(precision: str, storage_dtype: str) -> float:
    if precision not in PRECISION_TOLERANCE or storage_dtype not in STORAGE_TOLERANCE:
        raise ConfigError(f"no re-encode tolerance for precision {precision!r} / storage {storage_dtype!r}; known: "
                          f"{', '.join(PRECISION_TOLERANCE)} / {', '.join(STORAGE_TOLERANCE)}")
    return PRECISION_TOLERANCE[precision] + STORAGE_TOLERANCE[storage_dtype]


def _autotuned(root: Path) -> bool:
    config = json.loads((root / "cache_config.json").read_text(encoding="utf-8"))
    return bool((config.get("tokenizer") or {}).get("cudnn_benchmark"))


def choose_comparison(root: Path, device: str, precision: str, storage_dtype: str,
                      execution_changes: list[str]) -> Comparison:
    """Exact when the build recorded an environment equal to this one and the tokenizer's software versions
    agree; otherwise the documented tolerance, saying why."""
    tolerance = tolerance_for(precision, storage_dtype)
    built, why = build_environment(root)
    current = environment_record(device)
    if built is not None and built != current:
        changed = [f"{k} {built.get(k)!r} -> {current.get(k)!r}" for k in sorted(built.keys() | current.keys())
                   if built.get(k) != current.get(k)]
        why = "environment differs from the build's: " + ", ".join(changed)
    elif built is not None and execution_changes:
        why = "tokenizer software or code path differs from the build's: " + ", ".join(execution_changes)
    elif built is not None and _autotuned(root):
        why = "the build let cuDNN autotune its kernels (tokenizer.cudnn_benchmark), which may choose others here"
    elif built is not None:
        return Comparison(True, 0.0, "device model and software match the build's")
    return Comparison(False, tolerance, f"{why} ({precision} {PRECISION_TOLERANCE[precision]:.0e} + "
                                        f"{storage_dtype} storage {STORAGE_TOLERANCE[storage_dtype]:.2g})")
