"""Cosmos-Predict2 T5 pickles for a dataset folder, the outputs of Cosmos' own scripts (docs/text.md):
- `scripts/get_t5_embeddings.py`: `metas/<stem>.txt` -> `t5_xxl/<stem>.pickle`;
- `scripts/get_t5_embeddings_from_groot_dataset.py`: `metadata.csv` -> `metas/<stem>.txt` + pickles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...devices import choose_device
from ...errors import ConfigError
from ...io import write_text_atomic
from ...progress import Progress
from ...text.base import TextEncoder
from ...text.pickles import PICKLE_FOLDER, write_cosmos_pickle
from ...text.t5 import T5TextEncoder

GROOT_PROMPT_PREFIX = "The robot arm is performing a task. "  # the GR00T script's --prompt_prefix default
PROMPTS_PER_CHUNK = 256  # prompts encoded and written per step: bounds memory, keeps progress on disk


@dataclass
class T5PickleReport:
    folder: Path  # where the pickles are: <dataset_dir>/t5_xxl
    written: list[str] = field(default_factory=list)  # stems whose pickle this run wrote
    skipped: list[str] = field(default_factory=list)  # stems whose pickle already existed
    metas_written: list[str] = field(default_factory=list)  # metas/<stem>.txt written from metadata.csv


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
    progress: Progress | None = None,
) -> T5PickleReport:
    """Write `t5_xxl/<stem>.pickle` for every prompt of the dataset, skipping pickles that exist.

    Without `metadata_csv` the prompts are `metas/<stem>.txt` (stripped). With it, `metas/<stem>.txt` is
    written from the CSV first (GR00T route; `prompt_prefix` prepended) and its prompts are encoded.
    progress("encode", prompts to encode) returns the function advanced by n after each chunk of n pickles.
    """
    dataset_dir = Path(dataset_dir)
    report = T5PickleReport(dataset_dir / PICKLE_FOLDER)
    if metadata_csv is not None:
        prompts = read_groot_metadata(metadata_csv, prompt_prefix)
        for stem, prompt in prompts:
            meta = dataset_dir / "metas" / f"{stem}.txt"
            if not meta.is_file() or meta.read_text(encoding="utf-8") != prompt:
                write_text_atomic(meta, prompt)
                report.metas_written.append(stem)
    else:
        prompts = _metas_prompts(dataset_dir)
    pending = []
    for stem, prompt in prompts:
        if (report.folder / f"{stem}.pickle").exists():
            report.skipped.append(stem)
        else:
            pending.append((stem, prompt))
    advance = progress("encode", len(pending)) if progress else (lambda n: None)
    for start in range(0, len(pending), PROMPTS_PER_CHUNK):
        chunk = pending[start : start + PROMPTS_PER_CHUNK]
        batch = encoder.encode([prompt for _, prompt in chunk])
        for i, (stem, _) in enumerate(chunk):
            write_cosmos_pickle(report.folder / f"{stem}.pickle", batch.embeddings[i], int(batch.lengths[i]))
            report.written.append(stem)
        advance(len(chunk))
    return report


def cosmos_t5(dataset_dir: str | Path, t5_path: str | Path, metadata_csv: str | Path | None = None,
              prompt_prefix: str | None = None, precision: str = "fp32", max_length: int = 512,
              device: str | None = None, progress: Progress | None = None,
              padding: str = "max_length") -> T5PickleReport:
    """`latentforge cosmos t5`: load the T5 folder (on CUDA when available, unless `device` says otherwise) and
    write the dataset's pickles. `prompt_prefix` applies to metadata.csv prompts only (default: Cosmos');
    `progress` as in write_t5_pickles. `padding="max_length"` makes the pickles Cosmos' script would write on the
    same device, bit for bit; "none" runs each prompt at its own length (faster, float-rounding apart)."""
    if prompt_prefix is not None and metadata_csv is None:
        raise ConfigError("--prompt-prefix applies to --metadata-csv prompts only; metas/*.txt are used as written")
    device = choose_device(device)
    encoder = T5TextEncoder(str(t5_path), precision=precision, max_length=max_length, device=device, padding=padding)
    prefix = GROOT_PROMPT_PREFIX if prompt_prefix is None else prompt_prefix
    return write_t5_pickles(dataset_dir, encoder, metadata_csv, prefix, progress)
