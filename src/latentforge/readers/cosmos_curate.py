"""Reader for the output of Cosmos-Curate's split pipeline: `clips/<clip-uuid>.mp4` with their captioned windows in
`metas/v0/<clip-uuid>.json` (docs/long-videos.md).

Each window of a clip is one entry: its caption and its frames as a segment of the clip, [start_frame, end_frame + 1)
(Cosmos-Curate's end_frame is the window's last frame), which the plan turns into windows as it does a table row's
segment (pipeline/segments.py). A clip whose metadata cannot be used is a `bad_clip_meta` plan reject naming the clip.

Its T5 pickles (text.source=pickles): with `--generate-cosmos-predict-dataset predict2` the split pipeline encodes
each window's `<captioning-algorithm>_caption` with T5-XXL and writes it, as Cosmos-Predict2's own script does
(`pickle.dump([float16 (n_tokens, 1024)])`), to `cosmos_predict2_video2world_dataset/t5_xxl/<window key>.pickle`
(cosmos_curate/pipelines/video/read_write/metadata_writer_stage.py, `_write_per_window_data`). A window's pickle is
read as any Cosmos pickle (text/pickles.py). The enhanced captions have none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import DatasetConfig
from ..errors import ConfigError
from ..records import Reject, Sample, SourceEntry
from ..text.pickles import PICKLE_FOLDER, uses_pickles
from .base import Reader

if TYPE_CHECKING:
    from ..config.schema import BuildConfig

CLIPS = "clips"
FILTERED_CLIPS = "filtered_clips"  # clips Cosmos-Curate's own filters dropped: their metas are written too
METAS = "metas"
CAPTION_SUFFIX = "_caption"  # a window's captions: "<model>_caption", "<model>_enhanced_caption"
ENHANCED = "_enhanced"  # "<model>_enhanced": a caption source that has no T5 pickles
PREDICT_DATASET = "cosmos_predict2_video2world_dataset"  # per-window videos, metas and t5_xxl pickles


@dataclass(frozen=True)
class CosmosCurateOptions:
    """The cosmos_curate reader's own keys (dataset.KEY)."""

    # the captions to use: "qwen" reads each window's `qwen_caption`, "qwen_enhanced" its `qwen_enhanced_caption`;
    # unset: the one source the windows hold (several: refused, naming them)
    caption_source: str | None = None
    annotation_version: str = "v0"  # the metas/<version>/ folder (a later pass may write captions as v1)


def looks_like_curate_output(folder: Path) -> bool:
    """A folder with `clips/` and `metas/<version>/` folders: Cosmos-Curate's split output."""
    metas = folder / METAS
    return (folder / CLIPS).is_dir() and metas.is_dir() and any(p.is_dir() for p in metas.iterdir())


def curate_options(config: DatasetConfig) -> CosmosCurateOptions:
    return config.options if isinstance(config.options, CosmosCurateOptions) else CosmosCurateOptions()


class CosmosCurateReader(Reader):
    """One entry per captioned window of every clip; key `<clip-uuid>_<start_frame>_<end_frame>`, Cosmos-Curate's
    own name for a window (its previews and Cosmos-Predict2 dataset files use it)."""

    name = "cosmos_curate"
    options_class = CosmosCurateOptions
    pickle_fix = ("run Cosmos-Curate's split with --generate-cosmos-predict-dataset predict2 (it writes no pickle "
                  "for a window whose caption failed), or use text.source=pickles+encoder")

    def __init__(self, config: DatasetConfig):
        super().__init__(config)
        if len(config.path) != 1:
            raise ConfigError(f"dataset.path={config.path!r}: the cosmos_curate reader takes one folder, the split "
                              "pipeline's output (holding clips/ and metas/); build one cache per folder")
        self.root = Path(config.path[0])
        self.options = curate_options(config)

    @classmethod
    def claims(cls, paths: list[str]) -> bool:
        return len(paths) == 1 and Path(paths[0]).is_dir() and looks_like_curate_output(Path(paths[0]))

    @classmethod
    def check_config(cls, config: BuildConfig) -> None:
        super().check_config(config)
        source = curate_options(config.dataset).caption_source
        if uses_pickles(config.text) and source is not None and source.endswith(ENHANCED):
            raise ConfigError(f"dataset.caption_source={source!r} with text.source={config.text.source!r}: "
                              f"Cosmos-Curate's T5 pickles encode the `{source[:-len(ENHANCED)]}{CAPTION_SUFFIX}` "
                              f"captions, not the enhanced ones; set dataset.caption_source="
                              f"{source[:-len(ENHANCED)]!r}, or text.source=encoder to encode the enhanced captions")

    @classmethod
    def pickle_lookup_rule(cls, config: BuildConfig) -> str:
        return f"<dataset>/{PREDICT_DATASET}/{PICKLE_FOLDER}/<clip-uuid>_<start_frame>_<end_frame>.pickle"

    @classmethod
    def pickle_path(cls, sample: Sample, config: BuildConfig) -> Path:
        """The window's pickle: Cosmos-Curate names it by the window's key, `<clip-uuid>_<start>_<end>`."""
        return Path(config.dataset.path[0]) / PREDICT_DATASET / PICKLE_FOLDER / f"{sample.entry.key}.pickle"

    def entries(self) -> list[SourceEntry]:
        self.rejects = []
        metas_dir = self.root / METAS / self.options.annotation_version
        if not metas_dir.is_dir():
            found = sorted(p.name for p in (self.root / METAS).iterdir() if p.is_dir()) if (
                self.root / METAS).is_dir() else []
            raise ConfigError(f"{self.root} has no {METAS}/{self.options.annotation_version}/ folder (dataset."
                              f"annotation_version); it has: {', '.join(found) or 'none'}")
        metas = {p.stem: p for p in sorted(metas_dir.glob("*.json"))}
        clips = {p.stem: p for p in sorted((self.root / CLIPS).glob("*.mp4"))}
        loaded = {uuid: self._load(uuid, path) for uuid, path in metas.items()}
        loaded = {uuid: meta for uuid, meta in loaded.items() if meta is not None}
        source = self._caption_source(loaded)
        entries: list[SourceEntry] = []
        for uuid in sorted(set(metas) | set(clips)):
            if uuid not in metas:
                self._reject(uuid, f"{CLIPS}/{uuid}.mp4 has no metadata {self._meta_rel(uuid)}")
            elif uuid in loaded:
                entries += self._clip_entries(uuid, loaded[uuid], source)
        if not entries and not self.rejects:
            raise ConfigError(f"{metas_dir} holds no clip metadata (<clip-uuid>.json); nothing to cache")
        return entries

    # ------------------------------------------------------------------ one clip
    def _meta_rel(self, uuid: str) -> str:
        return f"{METAS}/{self.options.annotation_version}/{uuid}.json"

    def _reject(self, uuid: str, detail: str) -> None:
        self.rejects.append(Reject(uuid, -1, "bad_clip_meta", f"clip {uuid}: {detail}", "plan"))

    def _load(self, uuid: str, path: Path) -> dict[str, Any] | None:
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            self._reject(uuid, f"{self._meta_rel(uuid)} cannot be read as JSON ({type(error).__name__}: {error})")
            return None
        if not isinstance(meta, dict) or not isinstance(meta.get("windows"), list):
            self._reject(uuid, f"{self._meta_rel(uuid)} has no `windows` list")
            return None
        return meta

    def _caption_source(self, metas: dict[str, dict[str, Any]]) -> str | None:
        """dataset.caption_source, or the one source the windows hold (None: they hold no caption at all)."""
        found = sorted({key[:-len(CAPTION_SUFFIX)] for meta in metas.values() for window in meta["windows"]
                        if isinstance(window, dict) for key in window if key.endswith(CAPTION_SUFFIX)})
        wanted = self.options.caption_source
        if wanted is not None:
            if found and wanted not in found:
                raise ConfigError(f"dataset.caption_source={wanted!r}: no window has a `{wanted}{CAPTION_SUFFIX}`; "
                                  f"the windows hold captions from: {', '.join(found)}")
            return wanted
        if len(found) > 1:
            raise ConfigError(f"the windows hold captions from several sources ({', '.join(found)}); choose one with "
                              "dataset.caption_source")
        return found[0] if found else None

    def _clip_entries(self, uuid: str, meta: dict[str, Any], source: str | None) -> list[SourceEntry]:
        clip = self.root / CLIPS / f"{uuid}.mp4"
        if not clip.is_file():
            if FILTERED_CLIPS in str(meta.get("clip_location", "")).replace("\\", "/").split("/"):
                return []  # dropped by Cosmos-Curate's own motion or aesthetic filter
            self._reject(uuid, f"{self._meta_rel(uuid)} names a clip that is not in the folder ({CLIPS}/{uuid}.mp4)")
            return []
        if not meta["windows"]:
            self._reject(uuid, f"{self._meta_rel(uuid)} lists no captioned window")
            return []
        extra = {"source_video": meta.get("source_video"), "source_span": meta.get("duration_span")}
        entries = []
        for number, window in enumerate(meta["windows"]):
            start, end = (window.get(k) if isinstance(window, dict) else None for k in ("start_frame", "end_frame"))
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (start, end)) \
                    or end < start:
                self._reject(uuid, f"{self._meta_rel(uuid)} window {number}: start_frame {start!r} and end_frame "
                             f"{end!r} are not frame numbers 0 <= start <= end")
                return []
            caption = window.get(f"{source}{CAPTION_SUFFIX}") if source else None
            entries.append(SourceEntry(
                key=f"{uuid}_{start}_{end}",
                video=str(clip.absolute()),
                video_rel=f"{CLIPS}/{uuid}.mp4",
                caption=caption.strip() if isinstance(caption, str) else None,
                extra=dict(extra),
                segment={"start": start, "end": end + 1, "unit": "frames"},
                origin=f"{self._meta_rel(uuid)} window {number}",
            ))
        return entries
