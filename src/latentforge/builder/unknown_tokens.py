"""Captions the text encoder cannot read, said once per build.

The ranks record each row's unknown_token_fraction when they encode it (pipeline/unit.py), in processes of their
own; the main process counts the rows over text.max_unknown_fraction in the staged units it commits (also those
staged by an earlier, interrupted run) and, under text.on_unknown=warn, says so once when the build ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..config import TextConfig
from ..staging.staged_units import open_staged_unit

_EXAMPLES = 3


@dataclass
class UnknownTokenCount:
    """Over the rows committed so far: how many record a fraction, and which are over the limit."""

    measured: int = 0  # rows whose caption's fraction is known (encoder rows)
    over: list[tuple[str, float]] = field(default_factory=list)  # (sample_id, fraction) over the limit

    def add_units(self, unit_paths: Iterable[Path], limit: float) -> None:
        for path in unit_paths:
            with open_staged_unit(path) as staged:
                for row in staged.rows:
                    if row.unknown_token_fraction is None:
                        continue
                    self.measured += 1
                    if row.unknown_token_fraction > limit:
                        self.over.append((row.sample_id, row.unknown_token_fraction))

    def to_json(self) -> dict[str, int]:
        return {"captions_measured": self.measured, "captions_over_limit": len(self.over)}


def unknown_token_notice(count: UnknownTokenCount, text: TextConfig) -> str | None:
    """The one line a build says when captions went over text.max_unknown_fraction under text.on_unknown=warn."""
    if not count.over or text.on_unknown != "warn":
        return None
    worst = sorted(count.over, key=lambda item: (-item[1], item[0]))[:_EXAMPLES]
    examples = ", ".join(f"{sample_id} {fraction:.0%}" for sample_id, fraction in worst)
    return (f"{len(count.over)} of {count.measured} captions have more than {text.max_unknown_fraction:.0%} tokens "
            f"the {text.name} tokenizer does not know ({examples}): their text rows carry little of the caption "
            "(the manifest's unknown_token_fraction says how much). For non-English captions use a text encoder "
            "that reads them: text.name=umt5 (--text umt5 --text-path UMT5_FOLDER); or drop such samples with "
            "--set text.on_unknown=reject")
