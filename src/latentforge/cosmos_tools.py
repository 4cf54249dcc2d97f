"""Cosmos-Predict2 Video2World side files: T5 pickles for a dataset folder, and the batch-inference JSON.

These replace Cosmos' one-off scripts (formats.md §4-5) with the same outputs:
- `scripts/get_t5_embeddings.py`: `metas/<stem>.txt` -> `t5_xxl/<stem>.pickle`;
- `scripts/get_t5_embeddings_from_groot_dataset.py`: `metadata.csv` -> `metas/<stem>.txt` + pickles;
- `scripts/prepare_batch_input_json.py`: image/video + same-stem `.txt` -> a JSON list for `--batch_input_json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError
from .io import write_text_atomic
from .text.base import TextEncoder
from .text.pickles import write_cosmos_pickle

GROOT_PROMPT_PREFIX = "The robot arm is performing a task. "  # the GR00T script's --prompt_prefix default
BATCH_INPUT_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".mp4")
PROMPTS_PER_CHUNK = 256  # prompts encoded and written per step: bounds memory, keeps progress on disk


@dataclass
class T5PickleReport:
    written: list[str] = field(default_factory=list)  # stems whose pickle this run wrote
    skipped: list[str] = field(default_factory=list)  # stems whose pickle already existed
    metas_written: list[str] = field(default_factory=list)  # metas/<stem>.txt written from metadata.csv


@dataclass
class BatchJsonReport:
    entries: list[dict[str, str]]
    missing_prompt: list[str]  # inputs skipped because no same-stem .txt exists


def read_groot_metadata(csv_path: str | Path, prompt_prefix: str = GROOT_PROMPT_PREFIX) -> list[tuple[str, str]]:
    """(stem, full prompt) per data row of a GR00T `metadata.csv`, parsed as Cosmos' script does.

    The header row is skipped; the first comma splits `video_filename,prompt`; one pair of surrounding
    double quotes is stripped; the prefix is prepended. Text mode turns CRLF into LF as Cosmos' open() does.
    """
    csv_path = Path(csv_path)
    with open(csv_path, encoding="utf-8") as handle:
        lines = handle.readlines()[1:]
    rows: list[tuple[str, str]] = []
    first_line_of: dict[str, int] = {}
    for number, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        if "," not in line:
            raise ConfigError(f"{csv_path} line {number}: {line.rstrip()!r} has no comma; expected video_file,prompt")
        video_filename, prompt = line.split(",", 1)
        prompt = prompt.strip("\n")
        if len(prompt) >= 2 and prompt.startswith('"') and prompt.endswith('"'):
            prompt = prompt[1:-1]
        stem = Path(Path(video_filename).name).stem
        if stem in ("", ".", ".."):
            raise ConfigError(f"{csv_path} line {number}: video file name {video_filename!r} gives no usable stem")
        if stem in first_line_of:
            raise ConfigError(
                f"{csv_path} lines {first_line_of[stem]} and {number} both name {stem!r}; their metas/pickle "
                "files would overwrite each other. Keep one row per video"
            )
        first_line_of[stem] = number
        rows.append((stem, prompt_prefix + prompt))
    return rows


def _metas_prompts(dataset_dir: Path) -> list[tuple[str, str]]:
    metas = dataset_dir / "metas"
    if not metas.is_dir():
        raise ConfigError(f"{dataset_dir} has no metas/ folder; give a Cosmos dataset folder or --metadata-csv")
    return [(p.stem, p.read_text(encoding="utf-8").strip()) for p in sorted(metas.glob("*.txt"))]


def write_t5_pickles(
    dataset_dir: str | Path,
    encoder: TextEncoder,
    metadata_csv: str | Path | None = None,
    prompt_prefix: str = GROOT_PROMPT_PREFIX,
) -> T5PickleReport:
    """Write `t5_xxl/<stem>.pickle` for every prompt of the dataset, skipping pickles that exist.

    Without `metadata_csv` the prompts are `metas/<stem>.txt` (stripped). With it, `metas/<stem>.txt` is
    written from the CSV first (GR00T route; `prompt_prefix` prepended) and its prompts are encoded.
    """
    dataset_dir = Path(dataset_dir)
    report = T5PickleReport()
    if metadata_csv is not None:
        prompts = read_groot_metadata(metadata_csv, prompt_prefix)
        for stem, prompt in prompts:
            meta = dataset_dir / "metas" / f"{stem}.txt"
            if not meta.is_file() or meta.read_text(encoding="utf-8") != prompt:
                write_text_atomic(meta, prompt)
                report.metas_written.append(stem)
    else:
        prompts = _metas_prompts(dataset_dir)
    out_dir = dataset_dir / "t5_xxl"
    pending = []
    for stem, prompt in prompts:
        if (out_dir / f"{stem}.pickle").exists():
            report.skipped.append(stem)
        else:
            pending.append((stem, prompt))
    for start in range(0, len(pending), PROMPTS_PER_CHUNK):
        chunk = pending[start : start + PROMPTS_PER_CHUNK]
        batch = encoder.encode([prompt for _, prompt in chunk])
        for i, (stem, _) in enumerate(chunk):
            write_cosmos_pickle(out_dir / f"{stem}.pickle", batch.embeddings[i], int(batch.lengths[i]))
            report.written.append(stem)
    return report


def batch_input_entries(input_dir: str | Path, save_dir: str | Path) -> BatchJsonReport:
    """One `{"input_video", "prompt", "output_video"}` entry per image/video with a same-stem `.txt`.

    Inputs are taken in file-name order; `output_video` is `<save_dir>/<stem>.mp4`; paths keep the form
    given (relative stays relative), as Cosmos' script joins them.
    """
    input_dir = Path(input_dir)
    if not input_dir.is_dir():
        raise ConfigError(f"batch-json input {input_dir} is not a folder")
    inputs = sorted(p for p in input_dir.iterdir() if p.is_file() and p.suffix.lower() in BATCH_INPUT_SUFFIXES)
    entries: list[dict[str, str]] = []
    missing: list[str] = []
    owner: dict[str, str] = {}
    for media in inputs:
        caption = media.with_suffix(".txt")
        if not caption.is_file():
            missing.append(media.name)
            continue
        if media.stem in owner:
            raise ConfigError(
                f"{owner[media.stem]} and {media.name} in {input_dir} share the stem {media.stem!r} and would "
                "write the same output video; rename one"
            )
        owner[media.stem] = media.name
        entries.append({
            "input_video": str(input_dir / media.name),
            "prompt": caption.read_text(encoding="utf-8").strip(),
            "output_video": str(Path(save_dir) / f"{media.stem}.mp4"),
        })
    if not entries:
        raise ConfigError(
            f"no {'/'.join(BATCH_INPUT_SUFFIXES)} file with a same-stem .txt prompt in {input_dir}"
        )
    return BatchJsonReport(entries=entries, missing_prompt=missing)


def write_batch_json(input_dir: str | Path, out: str | Path, save_dir: str | Path) -> BatchJsonReport:
    """Write the batch-inference JSON list (indent=4, as Cosmos' script) to `out` atomically."""
    report = batch_input_entries(input_dir, save_dir)
    write_text_atomic(Path(out), json.dumps(report.entries, indent=4))
    return report
