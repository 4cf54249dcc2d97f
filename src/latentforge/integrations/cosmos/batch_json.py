"""The batch-inference JSON of Cosmos-Predict2 (`--batch_input_json`), as its
`scripts/prepare_batch_input_json.py` writes it: image/video + same-stem `.txt` -> a list of entries."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ...errors import ConfigError
from ...io import write_text_atomic

BATCH_INPUT_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".mp4")


@dataclass
class BatchJsonReport:
    entries: list[dict[str, str]]
    missing_prompt: list[str]  # inputs skipped because neither <stem>.txt nor <stem>..txt exists


def prompt_file(media: Path) -> Path | None:
    """`<stem>.txt`, else `<stem>..txt`, as Cosmos' script looks: in its DreamGen benchmark a prompt file keeps
    the full stop that ends the prompt where the image's name lost it (`...bag.png`, `...bag..txt`); None when
    neither exists."""
    for caption in (media.with_suffix(".txt"), media.with_name(f"{media.stem}..txt")):
        if caption.is_file():
            return caption
    return None


def batch_input_entries(input_dir: str | Path, save_dir: str | Path) -> BatchJsonReport:
    """One `{"input_video", "prompt", "output_video"}` entry per image/video with a prompt file (prompt_file).

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
        caption = prompt_file(media)
        if caption is None:
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
            f"no {'/'.join(BATCH_INPUT_SUFFIXES)} file with a same-stem .txt (or ..txt) prompt in {input_dir}"
        )
    return BatchJsonReport(entries=entries, missing_prompt=missing)


def write_batch_json(input_dir: str | Path, out: str | Path, save_dir: str | Path) -> BatchJsonReport:
    """Write the batch-inference JSON list (indent=4, as Cosmos' script) to `out` atomically."""
    report = batch_input_entries(input_dir, save_dir)
    write_text_atomic(Path(out), json.dumps(report.entries, indent=4))
    return report
