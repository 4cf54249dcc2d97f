"""`latentforge stats ROOT`: a cache's statistics as stats.json, PNG plots and one HTML page (docs/stats.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..cache.bucket_index import BucketIndex, is_bucketed
from ..cache.layout import RUN_RECORDS_DIR, STATS_FOLDER
from ..cache.whole_read import read_whole
from ..errors import ConfigError
from ..io import write_text_atomic
from ..progress import Progress
from ..sinks.dispatch import local_hdf5_cache
from ..sinks.hdf5.structure import check_cache_structure
from .plots import plot_channels, plot_counts, plot_frames, plot_histograms, render_html
from .statistics import DEFAULT_EXTREME, CacheStats, check_cosmos_tokenizer, compute_stats, export_cosmos_mean_std
from .token_plots import plot_rank_frequency, token_tables


@dataclass
class StatsReport:
    stats: CacheStats
    folder: Path
    stats_json: Path
    plots: list[Path]
    html: Path
    cosmos_mean_std: tuple[Path, Path] | None = None  # video_mean_std.pt, images_mean_std.pt

    @property
    def written(self) -> list[Path]:
        """Every file this report wrote, report.html last."""
        return [self.stats_json, *self.plots, *(self.cosmos_mean_std or ()), self.html]


def write_stats_report(stats: CacheStats, folder: Path, title: str = "latentforge cache statistics") -> StatsReport:
    """stats.json, the PNG plots and report.html under `folder`."""
    folder = Path(folder)
    stats_json = folder / "stats.json"
    write_text_atomic(stats_json, json.dumps(stats.to_json(), indent=2) + "\n")
    if stats.tokens is None:
        plots = [plot_channels(stats, folder / "latent_channels.png"),
                 plot_frames(stats, folder / "latent_frames.png"), plot_histograms(stats, folder / "latent_values.png")]
    else:
        plots = [plot_counts(stats.tokens.sequence_lengths, "sequence length (one modality's ids, T'H'W')",
                             "length", folder / "sequence_lengths.png"),
                 plot_rank_frequency(stats.tokens, folder / "token_rank_frequency.png")]
    if stats.text_lengths:
        plots.append(plot_counts(stats.text_lengths, "text length (tokens, </s> included)", "length",
                                 folder / "text_lengths.png"))
    if stats.unknown_tokens is not None and stats.unknown_tokens.with_unknown:
        plots.append(plot_counts(stats.unknown_tokens.histogram, "captions by their share of unknown tokens",
                                 "share of the caption's tokens the tokenizer does not know",
                                 folder / "unknown_tokens.png", in_order=True))
    if stats.rejects_by_reason:
        plots.append(plot_counts(stats.rejects_by_reason, "rejects by reason", "reason", folder / "rejects.png"))
    plots.append(plot_counts(stats.samples_per_source, "samples per source folder", "folder",
                             folder / "sources.png"))
    page = folder / "report.html"
    extra = "" if stats.tokens is None else token_tables(stats.tokens)
    write_text_atomic(page, render_html(stats, plots, title, extra))
    return StatsReport(stats, folder, stats_json, plots, page)


@dataclass
class BucketStatsReport:
    """A bucketed root's statistics: one StatsReport per bucket that holds samples, in index order."""

    buckets: dict[str, StatsReport]

    @property
    def written(self) -> list[Path]:
        return [path for report in self.buckets.values() for path in report.written]


def stats(root: str | Path, out: str | Path | None = None, extreme: float = DEFAULT_EXTREME, every: int = 1,
          cosmos_mean_std: str | Path | None = None, modality: str = "rgb",
          progress: Progress | None = None) -> StatsReport | BucketStatsReport:
    """Statistics of every `every`-th sample, written under `out` (default ROOT/build/stats); with
    `cosmos_mean_std`, also Cosmos-Predict2's mean/std files of `modality` into that folder. `progress` as in
    compute_stats. A bucketed root gets a report per bucket with samples, in `<out>/<bucket>` (and
    `<cosmos_mean_std>/<bucket>`)."""
    root = local_hdf5_cache(root, "stats")
    if is_bucketed(root):
        folder = Path(out) if out is not None else root / RUN_RECORDS_DIR / STATS_FOLDER
        reports = {}
        for entry in read_whole(root, BucketIndex.load).filled:  # the buckets' files are the root's, swap or not
            if entry.num_samples == 0:  # every sample of it was rejected while encoding: nothing to measure
                continue
            cosmos = None if cosmos_mean_std is None else Path(cosmos_mean_std) / entry.name
            report = stats(root / str(entry.path), folder / entry.name, extreme, every, cosmos, modality, progress)
            assert isinstance(report, StatsReport)  # a bucket's root is a single cache
            reports[entry.name] = report
        return BucketStatsReport(reports)
    # one whole cache, even while a build swaps a new one in (read again when the swap cut the read short)
    computed = read_whole(root, lambda published: _computed(root, published, extreme, every, cosmos_mean_std,
                                                            modality, progress))
    report = write_stats_report(computed, Path(out) if out is not None else root / RUN_RECORDS_DIR / STATS_FOLDER)
    if cosmos_mean_std is not None:
        report.cosmos_mean_std = export_cosmos_mean_std(computed, Path(cosmos_mean_std), modality)
    return report


def _computed(root: Path, published: Path, extreme: float, every: int, cosmos_mean_std: str | Path | None,
              modality: str, progress: Progress | None) -> CacheStats:
    """compute_stats of the cache at `root`, read from `published` (cache/whole_read.py), once its modality and
    tokenizer are checked."""
    config = check_cache_structure(published)
    held = [m.name for m in config.latent.modalities]
    if modality not in held:
        raise ConfigError(f"--modality {modality!r}: {root} holds {', '.join(held)}")
    if cosmos_mean_std is not None:
        check_cosmos_tokenizer(config, root)  # before the statistics are computed
    return compute_stats(published, extreme=extreme, every=every, progress=progress)
