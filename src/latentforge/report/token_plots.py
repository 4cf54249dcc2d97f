"""The plots and HTML tables of a discrete-token cache's statistics (token_statistics.py), for report.html."""

from __future__ import annotations

import numpy as np

from .plots import _pyplot, _save, _table
from .token_statistics import TokenStats


def plot_rank_frequency(tokens: TokenStats, path):
    """Count of each used id against its frequency rank, log-log: a Zipf-like line, or a cliff where few ids
    carry most tokens."""
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(9, 3.2))
    counts = np.asarray(tokens.rank_frequency, dtype=np.float64)
    ax.loglog(np.arange(1, len(counts) + 1), counts / max(tokens.num_tokens, 1), marker=".", linestyle="-")
    ax.set_title(f"rank-frequency: {tokens.used_ids} of {tokens.vocabulary} ids used "
                 f"({tokens.utilisation:.2%})")
    ax.set_xlabel("rank")
    ax.set_ylabel("fraction of tokens")
    ax.grid(alpha=0.3, which="both")
    return _save(figure, path)


def token_tables(tokens: TokenStats) -> str:
    """Utilisation, the top ids and the lowest-entropy samples, as HTML."""
    summary = [["vocabulary", tokens.vocabulary], ["FSQ levels", tokens.fsq_levels or "-"],
               ["tokens read", tokens.num_tokens], ["ids used", f"{tokens.used_ids} ({tokens.utilisation:.2%})"],
               ["entropy per sample (bits)", ", ".join(f"{k} {v:.3f}" for k, v in tokens.entropy_bits.items())]]
    if tokens.level_utilisation is not None:
        summary.append(["levels used per FSQ channel",
                        ", ".join(f"c{c}: {u:.0%}" for c, u in enumerate(tokens.level_utilisation))])
    top = [[int(i), int(c), f"{f:.4%}"] for i, c, f in tokens.top_ids]
    low = [[s.dataset_index, s.sample_id, f"{s.entropy_bits:.3f}", s.distinct_ids] for s in tokens.low_entropy]
    return (f"<h2>Tokens</h2>{_table(['what', 'value'], summary)}"
            f"<h2>Most frequent ids</h2>{_table(['id', 'count', 'fraction'], top)}"
            "<h2>Lowest-entropy samples</h2>"
            f"{_table(['dataset_index', 'sample_id', 'entropy (bits)', 'distinct ids'], low)}")
