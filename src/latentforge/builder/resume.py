"""What a resumed build must share with the staged work, and the readable refusal when it does not.

ROOT/build/run.json records the package version, the output-defining config, the tokenizer checkpoint's
SHA-256 and the inputs' fingerprint. The config holds everything that changes a latent's bits: the tokenizer,
its precision, its causal window and memory budget (both set the shapes cuDNN picks kernels for), how kernels
are chosen, the batching and the storage dtype. Only where units run and how many decode workers feed them
(procs, gpus, workers, executor) are left out, and tokenizer.sha256: it only checks the checkpoint, whose
actual SHA-256 the key holds. The config is checked before the plan is made, the inputs right
after it: both before any model is loaded. Before any unit is encoded, the environment (device model and
software) the run's ranks will record is compared with the staged units' own.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import warnings
from pathlib import Path
from typing import Any

from .. import registry
from ..cache.layout import CACHE_CONFIG
from ..cache.tokenizer_identity import identity_differences, tokenizer_identity
from ..conditioning.clip_embedding import ClipImageEmbedder
from ..config import BuildConfig, ConditioningConfig, SegmentsConfig
from ..config.option_roles import LOCATION, PERMISSION, keys_with_role
from ..config.schema import single_shape_frames
from ..decode.transnetv2_weights import weights_sha256 as transnetv2_weights_sha256
from ..errors import DamagedFile, DamagedFileWarning, LatentforgeError, one_line
from ..executor.base import Executor
from ..io import canonical_json
from ..pipeline.audio_latent import audio_checkpoint_digest
from ..pipeline.plan import diff_fingerprints
from ..pipeline.run_record import RESTART, read_run_record, write_run_record
from ..staging.staged_units import open_staged_unit
from ..version import __version__


def tokenizer_sha256(config: BuildConfig) -> str | None:
    """SHA-256 of the tokenizer checkpoint as the backend computes it (None for analytic tokenizers)."""
    return registry.resolve("tokenizer", config.tokenizer.name).checkpoint_digest(config.tokenizer.checkpoint)


def resume_key(config: BuildConfig) -> dict[str, Any]:
    data = config.to_dict()
    data["output"] = {k: v for k, v in data["output"].items() if k not in ("root", "min_free_bytes", "staging_dir",
                                                                                  "staging_url")}
    data["run"] = {"seed": data["run"]["seed"]}
    # a reader's keys as it records them (the table reader leaves its segment keys out while unset)
    options = config.dataset.options
    own = {f.name for f in dataclasses.fields(options)} if dataclasses.is_dataclass(options) else set()
    recorded = registry.resolve("reader", config.dataset.reader).recorded_keys(options) if own else {}
    data["dataset"] = {k: v for k, v in data["dataset"].items() if k != "limit" and (k not in own or k in recorded)}
    if config.text.on_unknown == "warn":  # warn changes nothing staged: the key such builds had before these keys
        data["text"] = {k: v for k, v in data["text"].items() if k not in ("on_unknown", "max_unknown_fraction")}
    for name in ("mask", "depth"):  # fps only when set: the key builds had before it
        if data["modalities"][name]["fps"] == "source":
            del data["modalities"][name]["fps"]
    if not config.frames.buckets:  # a single-shape build keeps the key it always had
        data["frames"] = single_shape_frames(config.frames)
    # tokenizer.sha256 is a check on the checkpoint, whose actual SHA-256 the key holds below; the tokenizer's keys
    # that only locate files (e.g. where kernel plans are looked up: a resumed build replays its own book first,
    # and a plan changes bits only through that book, which the build records) or only let a machine run the
    # same function are not part of it
    free = keys_with_role(config.tokenizer.options, LOCATION, PERMISSION)
    data["tokenizer"] = {k: v for k, v in data["tokenizer"].items() if k != "sha256" and k not in free}
    # a build without conditioning keeps the key it always had; image_encoder_sha256 is a check, like tokenizer.sha256,
    # on the image encoder's weights, whose actual SHA-256 the key holds
    key = {"latentforge_version": __version__, "tokenizer_sha256": tokenizer_sha256(config), "config": data}
    if config.segments == SegmentsConfig():  # a build that cuts no shots keeps the key it always had
        del data["segments"]
    elif config.segments.detect != "transnetv2":  # nor does one with another detector (both keys are unset)
        data["segments"] = {k: v for k, v in data["segments"].items() if not k.startswith("transnetv2_")}
    else:  # transnetv2_sha256 is a check on the weights, whose actual SHA-256 the key holds
        del data["segments"]["transnetv2_sha256"]
        key["transnetv2_sha256"] = transnetv2_weights_sha256(config.segments.transnetv2_weights)
    if not config.audio.enabled:  # a build without sound keeps the key it always had
        del data["audio"]
    else:
        # a build without an audio tokenizer keeps the key it had; with one, audio.sha256 is a check, like
        # tokenizer.sha256, on the weights, whose actual SHA-256 the key holds
        audio_keys = ("tokenizer", "checkpoint", "sha256", "precision")
        if config.audio.tokenizer == "none":
            data["audio"] = {k: v for k, v in data["audio"].items() if k not in audio_keys}
        else:
            del data["audio"]["sha256"]
            key["audio_tokenizer_sha256"] = audio_checkpoint_digest(config)
    if config.captions.mode == "keep":  # a build that generates no caption keeps the key it always had
        del data["captions"]
    else:  # captions.sha256 is a check on the weights, whose actual SHA-256 the key holds
        del data["captions"]["sha256"]
        key["captioner_sha256"] = registry.resolve("captioner", config.captions.name).checkpoint_digest(
            config.captions.model)
    if not config.dedup.enabled:  # a build that removes no near duplicate keeps the key it always had
        del data["dedup"]
    else:  # dedup.sha256 is a check on the weights, whose actual SHA-256 the key holds
        del data["dedup"]["sha256"]
        key["dedup_model_sha256"] = ClipImageEmbedder.checkpoint_digest(config.dedup.model)
    if config.conditioning == ConditioningConfig():
        del data["conditioning"]
    else:
        del data["conditioning"]["image_encoder_sha256"]
        if config.conditioning.image_embeds != "none":
            encoder = registry.resolve("image_encoder", config.conditioning.image_embeds)
            key["image_encoder_sha256"] = encoder.checkpoint_digest(config.conditioning.image_encoder_path)
    return key


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else k))
        return out
    return {prefix: value}


_ABSENT = object()


def check_config(build_dir: Path, key: dict[str, Any], may_differ: tuple[str, ...] = ()) -> None:
    """Refuse, listing every changed key as `key: old -> new`, when the staged work used another config.
    `may_differ`: flattened keys left out (--extend reads a grown listing from a new dataset.path)."""
    previous = read_run_record(build_dir)
    if previous is None:
        return
    old, new = _flatten(previous["key"]), _flatten(key)
    # A key only the record has is a setting this config no longer has (another backend's, which earlier versions
    # recorded for every backend), so it cannot change what this build writes.
    changed = sorted(k for k in new if old.get(k, _ABSENT) != new[k] and k not in may_differ)
    if changed:
        lines = "\n".join(f"  {k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed)
        grown = "a grown listing in another file is added with --extend (docs/extend.md); " \
            if changed == ["config.dataset.path"] else ""
        raise LatentforgeError(f"this cache root holds a build with a different config; refusing to resume:\n"
                               f"{lines}\n{grown}{_old_values(changed, old)}{RESTART}")


def _old_values(changed: list[str], old: dict[str, Any]) -> str:
    """The --set flags that give the staged build's values back (a preset whose default changed, a mistyped flag),
    for the changed keys a flag can set."""
    flags = [f"--set {shlex.quote(k.removeprefix('config.') + '=' + _flag_value(old[k]))}"
             for k in changed if k.startswith("config.") and k in old]
    return f"to resume it, give its values back: {' '.join(flags)}; or " if flags else ""


def _flag_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def check_existing_cache(root: Path, config: BuildConfig, key: dict[str, Any], build_dir: Path) -> None:
    """Refuse to build into a root whose cache was encoded by another tokenizer or checkpoint, also when its
    build records are gone (a fetched or copied cache): its shards and the new ones would be of two functions.
    A damaged cache_config.json is left for the commit to rewrite while run.json holds the key the staged units
    were encoded with (check_config compares it); without one the refusal names the file."""
    path = Path(root) / CACHE_CONFIG
    if not path.is_file():
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        problem = None if isinstance(data, dict) else f"holds {type(data).__name__}, not an object"
    except (OSError, ValueError) as error:
        problem = one_line(error)
    if problem is not None:
        if read_run_record(build_dir) is None:
            raise DamagedFile(path, problem, "the tokenizer that encoded the cache there is unknown; fetch the "
                              f"cache again, or {RESTART}")
        warnings.warn(f"{path} is damaged ({problem}); the commit writes it again", DamagedFileWarning, stacklevel=2)
        return
    existing = data.get("tokenizer") or {}
    new = {"name": config.tokenizer.name, "checkpoint_sha256": key["tokenizer_sha256"]}
    differences = identity_differences(tokenizer_identity(existing), new, "the cache", "this build")
    if differences:
        raise LatentforgeError(f"{root} holds a cache encoded by another tokenizer; refusing to mix them:\n  "
                               + "\n  ".join(differences) + f"\n{RESTART}")


def check_inputs(build_dir: Path, key: dict[str, Any], fingerprint: dict[str, Any], may_grow: bool = False) -> None:
    """Refuse when the inputs changed ("N added, M removed, K changed"); record key and inputs on a first run.
    `may_grow`: inputs that hold every recorded one unchanged, and more, are recorded too (a bucket's members when
    --extend adds to them)."""
    previous = read_run_record(build_dir)
    if previous is None or (may_grow and _only_added(previous["inputs"], fingerprint)):
        write_run_record(build_dir, key, fingerprint)
        return
    diff = diff_fingerprints(previous["inputs"], fingerprint)
    if diff:
        grown = "rerun with --extend to add the new samples to the cache and keep its rows (docs/extend.md), or "
        raise LatentforgeError(f"the inputs changed since this cache root's build started; refusing to resume:\n"
                               f"  inputs: {diff}\n{grown if _only_added(previous['inputs'], fingerprint) else ''}"
                               f"{RESTART}")


def _only_added(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Does the new listing hold every old sample as it was, and more: what --extend grows a cache by?"""
    before, after = old.get("entries", {}), new.get("entries", {})
    return len(after) > len(before) and all(after.get(i) == key for i, key in before.items())


def check_environment(config: BuildConfig, executor: Executor, staged: list[Path]) -> None:
    """Refuse to encode units where the `staged` ones were not encoded, naming each differing field as
    `environment.FIELD: staged X -> this run Y`: one cache would hold latents of two environments. Run before
    any model loads; skipped with run.allow_mixed_environments and where the executor cannot know its ranks'
    environments up front (Ray), both left to verify's warning."""
    if not staged or config.run.allow_mixed_environments:
        return
    this_run = executor.encoding_environments()
    if this_run is None:
        return
    lines = sorted({f"  environment.{k}: staged {old.get(k)!r} -> this run {new.get(k)!r}"
                    for old in _staged_environments(staged) for new in this_run
                    for k in old.keys() | new.keys() if old.get(k) != new.get(k)})
    if lines:
        raise LatentforgeError("this cache root's staged units were encoded in another environment; refusing to "
                               "resume, which would mix them with this run's units in one cache:\n"
                               + "\n".join(lines) + "\nrun where the staged units were encoded, rerun with "
                               "--overwrite to start over, or accept the mix with --set "
                               "run.allow_mixed_environments=true (verify then warns)")


def _staged_environments(paths: list[Path]) -> list[dict[str, str]]:
    """The distinct environments the staged units record (units staged before they recorded one have none)."""
    found: dict[str, dict[str, str]] = {}
    for path in paths:
        with open_staged_unit(path) as unit:
            if unit.encoded_by is not None:
                found.setdefault(canonical_json(unit.encoded_by["environment"]), unit.encoded_by["environment"])
    return list(found.values())
