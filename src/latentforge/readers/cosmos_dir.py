"""Reader for the Cosmos-Predict2 dataset layout: `videos/*.mp4` with a same-stem caption in `metas/*.txt`."""

from __future__ import annotations

import unicodedata
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import DatasetConfig
from ..errors import ConfigError, InputNotice
from ..records import Sample, SourceEntry
from ..text.pickles import PICKLE_FOLDER
from .base import Reader
from .cosmos_curate import looks_like_curate_output

if TYPE_CHECKING:
    from ..config.schema import BuildConfig


class CosmosDirReader(Reader):
    """Lists `<root>/videos/*.mp4` (any case of the extension; not recursive, like Cosmos' own Dataset class) with
    their captions.

    key = "videos/<stem>" and video_rel = "videos/<name>", both NFC-normalised so that a folder copied
    through a macOS filesystem (NFD names) keeps its sample ids; `video` keeps the name as stored on disk
    so it can still be opened.
    """

    name = "cosmos_dir"

    def __init__(self, config: DatasetConfig):
        super().__init__(config)
        if not config.path:
            raise ConfigError("dataset.path is empty; give the Cosmos dataset folder (holding videos/ and metas/)")
        if len(config.path) > 1:
            raise ConfigError(
                f"dataset.path={config.path!r}: the cosmos_dir reader takes one folder; build one cache per "
                "folder or list the videos in a table (dataset.reader=table)"
            )
        self.root = Path(config.path[0])

    @classmethod
    def claims(cls, paths: list[str]) -> bool:
        """dataset.reader=auto: one folder, unless it is Cosmos-Curate's split output (cosmos_curate reads that)."""
        return len(paths) == 1 and Path(paths[0]).is_dir() and not looks_like_curate_output(Path(paths[0]))

    @classmethod
    def pickle_lookup_rule(cls, config: BuildConfig) -> str:
        return f"<dataset>/{PICKLE_FOLDER}/<stem>.pickle"

    @classmethod
    def pickle_path(cls, sample: Sample, config: BuildConfig) -> Path:
        folder = Path(config.dataset.path[0]) / PICKLE_FOLDER
        on_disk = folder / f"{Path(sample.entry.video).stem}.pickle"
        if on_disk.is_file():
            return on_disk
        # The stem as entries() normalises it: a folder copied through macOS holds NFD names.
        return folder / f"{unicodedata.normalize('NFC', Path(sample.entry.video).stem)}.pickle"

    def entries(self) -> list[SourceEntry]:
        videos_dir = self.root / "videos"
        if not videos_dir.is_dir():
            raise ConfigError(
                f"{self.root} has no videos/ folder; the cosmos_dir reader expects <root>/videos/*.mp4 and "
                "<root>/metas/*.txt (set dataset.path to that root)"
            )
        files = sorted(p for p in videos_dir.iterdir() if p.is_file())
        videos = [p for p in files if p.suffix.lower() == ".mp4"]  # V3.MP4 too: names from cameras and Windows
        others = [p.name for p in files if p.suffix.lower() != ".mp4"]
        if others:
            shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            warnings.warn(f"{videos_dir} holds {len(others)} file(s) the cosmos_dir reader does not list, which reads "
                          f".mp4 only ({shown}); convert them, or list every video in a table (dataset.reader=table)",
                          InputNotice, stacklevel=2)
        if not videos:
            raise ConfigError(f"{videos_dir} holds no .mp4 file; nothing to cache")
        return [self._entry(video) for video in videos]

    def _entry(self, video: Path) -> SourceEntry:
        name = unicodedata.normalize("NFC", video.name)
        stem = unicodedata.normalize("NFC", video.stem)
        return SourceEntry(
            key=f"videos/{stem}",
            video=str(video.absolute()),
            video_rel=f"videos/{name}",
            caption=self._caption(self.root / "metas", (video.stem, stem)),
        )

    @staticmethod
    def _caption(metas: Path, stems: tuple[str, str]) -> str | None:
        """Caption of the first existing `metas/<stem>.txt`, trying the on-disk stem, then its NFC form."""
        found = [metas / f"{stem}.txt" for stem in stems if (metas / f"{stem}.txt").is_file()]
        if not found:
            return None
        path = found[0]
        try:
            # utf-8-sig: captions saved by Windows editors start with a BOM that is not part of the prompt
            return path.read_text(encoding="utf-8-sig").strip()
        except UnicodeDecodeError as error:
            raise ConfigError(
                f"caption file {path} is not valid UTF-8 ({error}); re-save it as UTF-8"
            ) from None
