"""`latentforge export CACHE --to musubi|musubi-hunyuanvideo|ltx2-trainer|ltx-video-trainer|pt-dicts DIR`: each
sample's files in musubi-tuner's Wan or HunyuanVideo cache layout, the LTX-2 or LTX-Video trainer's precomputed
latents, or as generic .pt dicts; a cache of a latent family the target does not write is refused first
(latent_family.py).

Each file appears only after it was loaded back and compared with the cache (write.py), so a rerun skips
every file that exists and writes the rest. `latentforge-export.json` in DIR names the cache (the SHA-256 of
its SHA256SUMS), the target and the modalities; an export into a folder made from anything else is refused.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Sequence

from ..cache.config_file import CacheConfig
from ..cache.layout import SUMS
from ..cache.whole_read import read_whole
from ..errors import ConfigError, DamagedFile, ForcedWarning
from ..hashing import sha256_file
from ..io import canonical_json, write_text_atomic
from ..locations import local_folder
from ..progress import Progress, start_step
from ..sinks.dispatch import local_hdf5_cache
from ..sinks.hdf5.dataset import LatentCacheDataset
from .files import ExportFile
from .latent_family import check_target_takes
from .musubi_i2v import MUSUBI_I2V_TASKS
from .targets import MUSUBI, RENAMED, TARGETS, musubi_files, wan_text_width_problem
from .write import write_verified

EXPORT_RECORD = "latentforge-export.json"
_BATCH = 16


@dataclass(frozen=True)
class ExportReport:
    folder: Path
    samples: int
    written: int  # files written by this run
    skipped: int  # files an earlier run had finished


def export_cache(root: str | Path, target: str, folder: str | Path, modalities: Sequence[str] | None = None,
                 progress: Progress | None = None, force: bool = False,
                 musubi_task: str | None = None) -> ExportReport:
    """Export every sample of the cache at `root` (all its modalities, or `modalities` stacked in that order).

    `force` exports a cache the target's model cannot take (a text width no Wan DiT takes), with a warning.
    `musubi_task` (musubi-tuner's `--task`: i2v-14B or i2v-A14B) refuses a cache without the image-to-video
    streams that task trains on; without it, the musubi target writes whichever of them the cache holds.
    """
    if target in RENAMED:
        raise ConfigError(f"export target {target!r} is now {RENAMED[target]!r} (generic per-sample .pt dicts, not "
                          "the LTX-2 trainer's format: docs/export.md); use --to " + RENAMED[target])
    if target not in TARGETS:
        raise ConfigError(f"export target {target!r} is not known; allowed: {', '.join(TARGETS)}")
    if musubi_task is not None and target != MUSUBI:
        raise ConfigError(f"--musubi-task names a musubi-tuner training task; the {target} target takes none")
    if musubi_task is not None and musubi_task not in MUSUBI_I2V_TASKS:
        raise ConfigError(f"musubi task {musubi_task!r} is not an image-to-video task this export checks; allowed: "
                          f"{', '.join(MUSUBI_I2V_TASKS)} (leave it out for text-to-video)")
    root = local_hdf5_cache(root, "export")
    # one whole cache, even while a build swaps a new one in: an export the swap cut short is done again from the
    # new one, skipping the files already written
    return read_whole(root, lambda published: _export(root, published, target, folder, modalities, progress, force,
                                                      musubi_task))


def _export(root: Path, published: Path, target: str, folder: str | Path, modalities: Sequence[str] | None,
            progress: Progress | None, force: bool, musubi_task: str | None) -> ExportReport:
    """export_cache of the cache at `root`, read from `published` (cache/whole_read.py)."""
    cache_config = CacheConfig.load(published)
    tokens = cache_config.tokens
    if tokens is not None:
        raise ConfigError(f"{root} holds token ids (a discrete tokenizer's, vocabulary {tokens.vocabulary}), not "
                          f"latents; the {target} target writes float latents for diffusion trainers. Read the ids "
                          "with LatentCacheDataset (docs/dataset.md), or build with a continuous tokenizer")
    check_target_takes(root, cache_config, target)
    dataset = LatentCacheDataset(published, modalities)
    if dataset.config.text is None and TARGETS[target].needs_text:
        raise ConfigError(f"{root} holds no text embeddings, which the {target} target writes; export a "
                          "cache built with text.name set")
    problem = wan_text_width_problem(dataset.config) if target == MUSUBI else None
    if problem is not None and not force:
        raise ConfigError(f"{root}: {problem}; or pass --force to export it anyway")
    if problem is not None:
        warnings.warn(f"{root}: exporting anyway (forced): {problem}", ForcedWarning, stacklevel=2)
    files_of = partial(musubi_files, task=musubi_task) if target == MUSUBI else TARGETS[target].files
    config, index = dataset.config, dataset.index
    target_fps = None if config.fps in (None, "source") else float(str(config.fps))

    def fps_of(i: int) -> float:  # the latent's frame rate: the target rate, else the source's (nan if unknown)
        return target_fps or float(index.source_fps[i])

    if len(dataset):  # what a target refuses is cache-wide (conditioning, channels): sample 0 refuses first
        files_of(config, 0, dataset.__getitems__([0])[0], fps_of(0))
    folder = Path(local_folder(str(folder), "the export folder"))
    if folder.resolve() == root.resolve() or root.resolve() in folder.resolve().parents:
        raise ConfigError(f"the export folder {folder} is inside the cache {root}, whose verify would then "
                          "fail on files it did not write; export into a folder outside it")
    _claim(folder, dataset, target)
    advance = start_step(progress, "samples", len(dataset), unit="samples")
    written = skipped = 0
    for start in range(0, len(dataset), _BATCH):
        indices = list(range(start, min(start + _BATCH, len(dataset))))
        files: list[ExportFile] = []
        for i, item in zip(indices, dataset.__getitems__(indices)):
            files += files_of(config, i, item, fps_of(i))
        for file in files:
            if (folder / file.rel).is_file():
                skipped += 1
            else:
                write_verified(folder, file)
                written += 1
        advance(len(indices))
    return ExportReport(folder, len(dataset), written, skipped)


def _claim(folder: Path, dataset: LatentCacheDataset, target: str) -> None:
    record = {"format": "latentforge-export", "target": target, "modalities": list(dataset.modalities),
              "cache_sha256sums_sha256": sha256_file(dataset.root / SUMS)}
    path = folder / EXPORT_RECORD
    if path.is_file():
        try:
            earlier = json.loads(path.read_text(encoding="utf-8"))
            problem = None if isinstance(earlier, dict) else f"holds {type(earlier).__name__}, not an object"
        except ValueError as error:  # not JSON, or not UTF-8
            problem = str(error)
        if problem is not None:
            raise DamagedFile(path, problem, "it says which cache the folder's files come from; export into an "
                              "empty folder, or delete that one first")
        if earlier != record:
            changed = [f"{key} {earlier.get(key)!r} there, {value!r} now" for key, value in record.items()
                       if earlier.get(key) != value]
            raise ConfigError(f"{folder} holds an export of another cache or other settings ({'; '.join(changed)}); "
                              "export into an empty folder, or delete that one first")
        return
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder} is a file; export into a new or empty folder")
    if folder.is_dir() and any(folder.iterdir()):
        raise ConfigError(f"{folder} is not empty and holds no {EXPORT_RECORD}; nothing was written. Export into a "
                          "new or empty folder")
    write_text_atomic(path, canonical_json(record) + "\n")
