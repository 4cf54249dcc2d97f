"""`latentforge build`: plan -> probe -> units (decode, tokenize, text, stage) -> commit -> verify.

The library function behind the CLI verb. Config errors surface in load_config/validate, before this runs;
bad samples become rejects; the output depends only on inputs, config, software and device model.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from . import __version__, registry
from .cache_config import make_cache_config
from .commit import CacheLayout, commit_cache
from .config import BuildConfig, window_step
from .decode.pyav import probe_video
from .errors import LatentforgeError, SampleRejected
from .estimate import check_free_disk, estimate_output_bytes
from .executor.unit import Unit, UnitContext, cut_units, run_unit
from .io import canonical_json, read_jsonl, write_text_atomic
from .lock import BuildLock
from .plan import diff_fingerprints, make_plan, plan_fingerprint, write_plan
from .probe import ProbeResult, probe_sample
from .progress import BuildProgress
from .records import Reject, Sample, SourceEntry
from .text.prompt_cache import PromptCache
from .transforms.window import window_starts
from .writers.staging import completed_units


@dataclass
class BuildResult:
    root: Path
    num_samples: int
    rejects_by_reason: dict[str, int]
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)


def _resume_key(config: BuildConfig) -> dict[str, Any]:
    """The parts of the config a resumed build must share with the staged work."""
    data = config.to_dict()
    data["output"] = {k: v for k, v in data["output"].items() if k not in ("root", "min_free_bytes")}
    data["run"] = {"seed": data["run"]["seed"]}
    data["dataset"] = {k: v for k, v in data["dataset"].items() if k != "limit"}
    return {"latentforge_version": __version__, "config": data}


def _check_resume(build_dir: Path, config: BuildConfig, fingerprint: dict[str, Any]) -> None:
    record = build_dir / "run.json"
    key = _resume_key(config)
    if record.exists():
        previous = json.loads(record.read_text(encoding="utf-8"))
        problems = []
        if previous["key"] != key:
            old, new = _flatten(previous["key"]), _flatten(key)
            changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            problems += [f"  {k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed]
        input_diff = diff_fingerprints(previous["inputs"], fingerprint)
        if input_diff:
            problems.append(f"  inputs: {input_diff}")
        if problems:
            raise LatentforgeError(
                "this cache root holds a build with a different config or inputs; refusing to resume:\n"
                + "\n".join(problems)
                + "\nrerun with --overwrite to start over, or use another output root"
            )
        return
    write_text_atomic(record, canonical_json({"key": key, "inputs": fingerprint}))


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else k))
        return out
    return {prefix: value}


def _text_dim_hint(config: BuildConfig) -> int:
    """Embedding width from the text model's config.json, for the disk estimate (4096 when unknown)."""
    path = Path(config.text.path or "") / "config.json"
    if path.is_file():
        return int(json.loads(path.read_text(encoding="utf-8")).get("d_model", 4096))
    return 4096


def _starts_for(config: BuildConfig):
    if window_step(config.frames) is None:
        return None

    def starts(entry: SourceEntry) -> list[int] | None:
        try:
            info = probe_video(entry.video, entry.key)
        except SampleRejected:
            return None
        step = window_step(config.frames)
        valid = window_starts(info, config.frames)
        return [s for s in valid if s % step == 0] or None

    return starts


def prepare_root(root: Path, overwrite: bool) -> None:
    """Create ROOT; with overwrite, clear a previous latentforge cache there (never an unrelated folder)."""
    if overwrite and root.exists() and any(root.iterdir()):
        if not ((root / "build").is_dir() or (root / "cache_config.json").exists()):
            raise LatentforgeError(f"--overwrite refused: {root} is not empty and is not a latentforge cache")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)


def plan_and_probe(config: BuildConfig, build_dir: Path, progress: BuildProgress):
    reader = registry.resolve("reader", config.dataset.reader)(config.dataset)
    entries = reader.entries()
    samples, plan_rejects = make_plan(entries, _starts_for(config), config.dataset.limit)
    write_plan(build_dir, samples, plan_rejects)
    probes: dict[int, ProbeResult | Reject] = {}
    with progress.task("probe", len(samples)) as advance:
        for sample in samples:
            try:
                probes[sample.source_index] = probe_sample(sample, config)
            except SampleRejected as error:
                probes[sample.source_index] = Reject(
                    sample.sample_id, sample.source_index, error.reason, error.detail, "probe"
                )
            advance(1)
    return samples, plan_rejects, probes


def build(config: BuildConfig, overwrite: bool = False, quiet: bool = False) -> BuildResult:
    started = time.perf_counter()
    root = Path(config.output.root)
    prepare_root(root, overwrite)
    build_dir = root / "build"
    progress = BuildProgress(quiet=quiet)
    with BuildLock(build_dir):
        tokenizer_cls = registry.resolve("tokenizer", config.tokenizer.name)
        samples, plan_rejects, probes = plan_and_probe(config, build_dir, progress)
        _check_resume(build_dir, config, plan_fingerprint(samples))
        probe_rejects = [p for p in probes.values() if isinstance(p, Reject)]
        if samples and len(probe_rejects) / len(samples) > config.run.max_reject_fraction:
            reasons = Counter(r.reason for r in probe_rejects)
            raise LatentforgeError(
                f"{len(probe_rejects)} of {len(samples)} samples rejected by the probe, more than "
                f"run.max_reject_fraction={config.run.max_reject_fraction}: {dict(reasons)}"
            )
        latent_shape = tokenizer_cls.latent_shape(config.frames.num_frames, config.frames.height, config.frames.width)
        total_shape = (latent_shape[0] * len(config.modalities.names), *latent_shape[1:])
        text_shape = None if config.text.name == "none" else (config.text.max_length, _text_dim_hint(config))
        accepted = len(samples) - len(probe_rejects)
        needed = estimate_output_bytes(accepted, total_shape, text_shape, config.output.storage_dtype)
        check_free_disk(root, needed, config.output.min_free_bytes)

        device = torch.device(config.run.device)
        tokenizer = tokenizer_cls.from_config(config.tokenizer, device)
        text_encoder = None
        if config.text.name != "none":
            text_encoder = registry.resolve("text", config.text.name).from_config(config.text, device)
        ctx = UnitContext(
            config=config,
            build_dir=build_dir,
            tokenizer=tokenizer,
            text=PromptCache(text_encoder) if text_encoder is not None else None,
        )
        units = cut_units(samples, probes, config.output.unit_size)
        done = completed_units(build_dir)
        todo: list[Unit] = [u for u in units if u.index not in done]
        with progress.task("encode", len(samples), completed=len(samples) - sum(len(u.samples) for u in todo)) as advance:
            for unit in todo:
                run_unit(unit, ctx)
                advance(len(unit.samples))

        empty_prompt = None
        text_datasets = None
        if text_encoder is not None:
            text_datasets = (text_encoder.embeddings_dataset, text_encoder.length_dataset)
            if config.text.empty_prompt:
                encoded = text_encoder.encode([""])
                empty_prompt = (encoded.embeddings.astype(config.output.storage_dtype), encoded.lengths)
        cache_config = make_cache_config(
            config,
            total_shape,
            tokenizer.fingerprint(),
            text_encoder.fingerprint() if text_encoder is not None else None,
            text_datasets,
            text_encoder.embed_dim if text_encoder is not None else None,
            tokenizer_cls.latent_channels,
        )
        layout = CacheLayout(
            latent_dataset=config.output.latent_dataset,
            latent_shape=total_shape,
            storage_dtype=config.output.storage_dtype,
            rows_per_shard=config.output.rows_per_shard,
            text_prefix=text_encoder.dataset_prefix if text_encoder is not None else None,
            text_dim=text_encoder.embed_dim if text_encoder is not None else None,
            max_length=config.text.max_length,
        )
        unit_paths = [path for _, path in sorted(completed_units(build_dir).items())]
        readme_context = {"text_note": getattr(text_encoder, "provenance_note", None)}
        result = commit_cache(root, layout, unit_paths, plan_rejects, cache_config, empty_prompt, readme_context)
        seconds = time.perf_counter() - started
        stats = {
            "utc": datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"),
            "seconds": seconds,
            "samples_planned": len(samples),
            "samples_encoded_this_run": ctx.samples_done,
            "stage_seconds": dict(ctx.seconds),
            "text_prompts_encoded": ctx.text.encoded_prompts if ctx.text else 0,
            "device": str(device),
        }
        write_text_atomic(build_dir / f"stats-{stats['utc']}.json", json.dumps(stats, indent=2))
        rejects = Counter(row["reason"] for row in read_jsonl(root / "rejects.jsonl"))
        return BuildResult(root, result.num_samples, dict(sorted(rejects.items())), seconds, stats)
