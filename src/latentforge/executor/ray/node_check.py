"""What every Ray worker checks on its node before its first unit, against what the driver saw.

A node that does not see the same dataset, models and output root as the driver would turn every sample it
gets into a reject, or stage latents of another function. So before any unit a worker checks: the latentforge
version, the output root (this build's lock is there and the staging folder is writable; not with
output.staging_url, where units go to object storage), the dataset (a few
sources of the plan, spread over it, open and with the size the driver sees), and the models (the tokenizer
checkpoint's SHA-256 equals the build's recorded one; the text encoder's weight and tokenizer files are there
with the driver's sizes). A failed check raises NodeCheckFailed; the driver then excludes that node and
gives its units to the others (executor/ray/unit_run.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ... import registry
from ...cache.layout import LOCK, RUN_RECORD, STAGING_DIR
from ...config import BuildConfig
from ...errors import LatentforgeError
from ...pipeline.unit_inputs import Unit
from ...version import __version__
from ..lock_record import read_lock_record

SOURCES_CHECKED = 3  # first, middle and last unit: a node missing part of the dataset likely misses one
_READ_BYTES = 4096


@dataclass(frozen=True)
class SourceFact:
    sample_id: str
    path: str
    size: int


@dataclass(frozen=True)
class NodeFacts:
    """What the driver saw; a worker's node must see the same."""

    version: str
    lock_token: str
    sources: tuple[SourceFact, ...]
    tokenizer_sha256: str | None  # the build's recorded checkpoint SHA-256 (ROOT/build/run.json)
    text_files: tuple[tuple[str, int], ...]  # (path, size) of the text encoder's weight and tokenizer files


class NodeCheckFailed(LatentforgeError):
    def __init__(self, check: str, path: str, detail: str, fix: str):
        super().__init__(f"{check} check failed for {path}: {detail}; {fix}")
        self.check, self.path = check, path


def _sources(units: list[Unit]) -> tuple[SourceFact, ...]:
    if not units:
        return ()
    picks = sorted({0, len(units) // 2, len(units) - 1})[:SOURCES_CHECKED]
    facts = []
    for i in picks:
        sample = units[i].samples[0]
        for path in (sample.entry.video, sample.entry.mask, sample.entry.depth):
            if path and os.path.isfile(path):
                facts.append(SourceFact(sample.sample_id, path, os.path.getsize(path)))
    return tuple(facts)


def _recorded_tokenizer_sha256(build_dir: Path) -> str | None:
    try:
        return json.loads((build_dir / RUN_RECORD).read_text(encoding="utf-8"))["key"]["tokenizer_sha256"]
    except (OSError, ValueError, KeyError):
        return None


def _text_files(config: BuildConfig) -> tuple[tuple[str, int], ...]:
    if config.text.name == "none" or not config.text.path or not os.path.isdir(config.text.path):
        return ()
    from ...text.hf_encoder import TOKENIZER_FILES, weight_files

    folder = Path(config.text.path)
    files = [*weight_files(folder), *(folder / n for n in TOKENIZER_FILES if (folder / n).is_file())]
    return tuple((str(f), f.stat().st_size) for f in files)


def node_facts(config: BuildConfig, build_dir: Path, units: list[Unit], lock_token: str) -> NodeFacts:
    return NodeFacts(__version__, lock_token, _sources(units), _recorded_tokenizer_sha256(Path(build_dir)),
                     _text_files(config))


def _check_output(build_dir: Path, token: str) -> None:
    lock = build_dir / LOCK
    record = read_lock_record(build_dir)
    if record is None or record.token != token:
        found = f"held by pid {record.pid} on {record.host}" if record else "missing or unreadable"
        raise NodeCheckFailed("output root", str(lock), f"this build's lock is {found} here",
                              "the output root must be one filesystem that every node mounts at the same path "
                              "(NFS, Lustre, ...)")
    staging = build_dir / STAGING_DIR
    probe = staging / f".node-check.tmp{os.getpid()}"
    try:
        staging.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as handle:
            handle.write(b"latentforge node check\n")
            handle.flush()
            os.fsync(handle.fileno())
        probe.unlink()
    except OSError as error:
        raise NodeCheckFailed("output root", str(staging), f"not writable ({error.strerror or error})",
                              "mount the output root read-write on this node") from None


def _check_dataset(sources: tuple[SourceFact, ...]) -> None:
    for fact in sources:
        try:
            size = os.path.getsize(fact.path)
            with open(fact.path, "rb") as handle:
                handle.read(_READ_BYTES)
        except OSError as error:
            raise NodeCheckFailed("dataset", fact.path, f"sample {fact.sample_id}'s source is not readable "
                                  f"({error.strerror or error})", "mount the dataset at the same path on every "
                                  "node") from None
        if size != fact.size:
            raise NodeCheckFailed("dataset", fact.path, f"sample {fact.sample_id}'s source has {size} bytes, "
                                  f"the driver sees {fact.size}", "give every node the same copy of the dataset")


def _check_models(config: BuildConfig, facts: NodeFacts) -> None:
    checkpoint = config.tokenizer.checkpoint
    if facts.tokenizer_sha256 and checkpoint:
        try:
            digest = registry.resolve("tokenizer", config.tokenizer.name).checkpoint_digest(checkpoint)
        except (OSError, LatentforgeError) as error:
            raise NodeCheckFailed("models", checkpoint, f"the tokenizer checkpoint cannot be read ({error})",
                                  "put the checkpoint at the same path on every node") from None
        if digest != facts.tokenizer_sha256:
            raise NodeCheckFailed("models", checkpoint, f"the tokenizer checkpoint has SHA-256 {digest}, the "
                                  f"build recorded {facts.tokenizer_sha256}", "copy the build's checkpoint to "
                                  "this node")
    for path, size in facts.text_files:
        try:
            found = os.path.getsize(path)
        except OSError as error:
            raise NodeCheckFailed("models", path, f"a text encoder file is missing ({error.strerror or error})",
                                  "put the text encoder folder at the same path on every node") from None
        if found != size:
            raise NodeCheckFailed("models", path, f"a text encoder file has {found} bytes, the driver sees "
                                  f"{size}", "copy the driver's text encoder folder to this node")


def check_node(config: BuildConfig, build_dir: Path | str, facts: NodeFacts) -> None:
    """Raise NodeCheckFailed naming the check and the path when this node cannot run the build's units."""
    if __version__ != facts.version:
        raise NodeCheckFailed("software", "latentforge", f"this node runs latentforge {__version__}, the driver "
                              f"{facts.version}", "install the same version on every node of the Ray cluster")
    if not config.output.staging_url:  # units go to that URL: this node needs no view of the build folder
        _check_output(Path(build_dir), facts.lock_token)
    _check_dataset(facts.sources)
    _check_models(config, facts)
