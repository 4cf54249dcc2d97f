"""PNG plots (matplotlib, Agg) of a cache's statistics and a one-page HTML report with the plots inlined,
so the page is a single file that can be mailed or attached to a run (docs/stats.md)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np

from ..io import atomic_path
from .statistics import CacheStats
from .unknown_token_statistics import unknown_summary

TOP_NAMES = 30  # source folders shown by name; the rest are summed

def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on build machines
    import matplotlib.pyplot as plt

    return plt


def _save(figure, path: Path) -> Path:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    _pyplot().close(figure)
    return path


def plot_channels(stats: CacheStats, path: Path) -> Path:
    """Per-channel mean +- std and min/max of each modality."""
    plt = _pyplot()
    rows = len(stats.modalities)
    figure, axes = plt.subplots(rows, 1, figsize=(9, 2.6 * rows), squeeze=False, layout="constrained")
    for ax, m in zip(axes[:, 0], stats.modalities):
        x = np.arange(len(m.mean))
        ax.errorbar(x, m.mean, yerr=m.std, fmt="o", capsize=3, label="mean +- std")
        ax.scatter(x, m.min, marker="v", s=12, label="min")
        ax.scatter(x, m.max, marker="^", s=12, label="max")
        ax.set_title(f"{m.name}: latent channels {m.channels[0]}..{m.channels[1] - 1}")
        ax.set_xticks(x)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8, loc="upper right")
    return _save(figure, path)


def plot_frames(stats: CacheStats, path: Path) -> Path:
    """Mean and std per channel x latent frame (what Cosmos' per-frame normalisation uses)."""
    plt = _pyplot()
    rows = len(stats.modalities)
    figure, axes = plt.subplots(rows, 2, figsize=(9, 2.8 * rows), squeeze=False, layout="constrained")
    for row, m in zip(axes, stats.modalities):
        for ax, values, label in ((row[0], m.frame_mean, "mean"), (row[1], m.frame_std, "std")):
            image = ax.imshow(np.asarray(values), aspect="auto", cmap="viridis")
            ax.set_title(f"{m.name}: {label} per channel x latent frame", fontsize=9)
            ax.set_xlabel("latent frame")
            ax.set_ylabel("channel")
            figure.colorbar(image, ax=ax)
    return _save(figure, path)


def plot_histograms(stats: CacheStats, path: Path) -> Path:
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(9, 3.2))
    edges = np.asarray(stats.histogram_edges)
    for m in stats.modalities:
        counts = np.asarray(m.histogram, dtype=np.float64)
        ax.stairs(counts / max(counts.sum(), 1), edges, label=f"{m.name} ({m.underflow + m.overflow} outside)")
    ax.set_yscale("log")
    ax.set_xlabel("latent value")
    ax.set_ylabel("fraction")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(figure, path)


def plot_counts(counts: dict, title: str, xlabel: str, path: Path, in_order: bool = False) -> Path:
    """A bar per key; integer keys (text lengths) on a numeric axis, names as the 30 largest plus "others" (or,
    `in_order`, every name in the order given: the bins of a histogram)."""
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(9, 3))
    if all(isinstance(k, int) for k in counts):
        ax.bar(list(counts), list(counts.values()), width=1.0)
    elif in_order:
        ax.bar([str(k) for k in counts], list(counts.values()))
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
    else:
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])
        shown = dict(ranked[:TOP_NAMES])
        if len(ranked) > TOP_NAMES:
            shown["others"] = sum(v for _, v in ranked[TOP_NAMES:])
        ax.bar([str(k) for k in shown], list(shown.values()))
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("samples")
    return _save(figure, path)


def _table(header: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(stats: CacheStats, plots: list[Path], title: str, extra: str = "") -> str:
    """The page; `extra` is HTML placed after the plots (a token cache's tables)."""
    summary = [["samples", stats.num_samples], ["latent", f"{stats.latent_dataset} {stats.latent_shape} "
               f"{stats.storage_dtype}"], ["rows read", f"every {stats.rows_read[1]}"],
               ["truncated prompts", stats.truncated_prompts],
               *([["captions with unknown tokens", unknown_summary(stats.unknown_tokens)]]
                 if stats.unknown_tokens is not None else []),
               *([["audio", f"{stats.audio.with_audio:.1%} of samples have audio, covering "
                   f"{stats.audio.mean_covered:.1%} of the window on average"]] if stats.audio is not None else []),
               ["rejects", ", ".join(f"{k}: {v}" for k, v in stats.rejects_by_reason.items()) or "none"]]
    channels = [[m.name, c, f"{m.mean[i]:.5g}", f"{m.std[i]:.5g}", f"{m.min[i]:.4g}", f"{m.max[i]:.4g}",
                 f"{m.extreme_fraction[i]:.3g}"] for m in stats.modalities for i, c in
                enumerate(range(m.channels[0], m.channels[1]))]
    images = "".join(
        f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode("ascii")}"><figcaption>{html.escape(p.stem)}</figcaption></figure>'
        for p in plots)
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;max-width:1000px;margin:auto}}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}"
        "img{max-width:100%}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{_table(['what', 'value'], summary)}{images}{extra}"
        + (f"<h2>Per channel</h2><p>|x| &ge; {stats.extreme:g} counts as extreme.</p>"
           f"{_table(['modality', 'channel', 'mean', 'std', 'min', 'max', 'extreme'], channels)}" if channels else "")
        + "</body></html>\n")
