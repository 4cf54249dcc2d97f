"""`latentforge stats ROOT`: thin wrapper over latentforge.report.stats_report.stats."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("stats", help="latent/text statistics of a cache, PNG plots and an HTML report")
    parser.add_argument("root")
    parser.add_argument("--out", help="folder for stats.json, the plots and report.html (default ROOT/build/stats)")
    parser.add_argument("--extreme", type=float, default=6.0, help="|x| at or above this counts as extreme (default 6)")
    parser.add_argument("--every", type=int, default=1, help="read every N-th sample only (default: all)")
    parser.add_argument("--export-cosmos-mean-std", metavar="DIR",
                        help="write Cosmos-Predict2's video_mean_std.pt and images_mean_std.pt into DIR")
    parser.add_argument("--modality", help="show only this modality, and export its statistics with "
                        "--export-cosmos-mean-std (default: every modality shown, rgb exported)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..report.stats_report import StatsReport, stats
    from ..report.unknown_token_statistics import unknown_summary
    from .common import console
    from .progress import progress_bars

    with progress_bars("samples") as bars:
        report = stats(args.root, args.out, args.extreme, args.every, args.export_cosmos_mean_std,
                       args.modality or "rgb", bars.start)
    single = isinstance(report, StatsReport)
    reports = {"": report} if single else {f"{name}: ": one for name, one in report.buckets.items()}
    out = console()
    for label, one in reports.items():
        computed = one.stats
        out.print(_token_table(computed, label) if computed.tokens is not None else
                  _latent_table(computed, label, args.modality))
        if computed.unknown_tokens is not None:
            out.print(f"unknown tokens in captions: {unknown_summary(computed.unknown_tokens)}")
        if one.cosmos_mean_std is not None:
            video = one.cosmos_mean_std[0]
            out.print(f"Cosmos mean/std: set mean_std_path to {video.parent / 'mean_std.pt'}")
    out.print(f"wrote {len(report.written)} files:")
    for path in report.written:
        out.print(f"  {path}")
    for one in reports.values():
        out.print(f"open {one.html} in a browser for the plots")
    return 0


def _latent_table(computed, label: str, modality: str | None):
    """A latent cache's summary: per modality (or the one `modality`), its channels' means, stds and extreme
    values."""
    from rich.table import Table

    table = Table("modality", "channels", "mean (min..max over channels)", "std (min..max)", "extreme fraction",
                  title=f"{label}{computed.num_samples} samples, {computed.latent_dataset} {computed.latent_shape}")
    for m in (m for m in computed.modalities if modality in (None, m.name)):
        table.add_row(m.name, f"{m.channels[0]}..{m.channels[1] - 1}", f"{min(m.mean):.4g}..{max(m.mean):.4g}",
                      f"{min(m.std):.4g}..{max(m.std):.4g}", f"{max(m.extreme_fraction):.3g}")
    return table


def _token_table(computed, label: str):
    """A discrete-token cache's summary: vocabulary use, entropy and the lowest-entropy samples."""
    from rich.table import Table

    tokens = computed.tokens
    table = Table("what", "value", title=f"{label}{computed.num_samples} samples, token ids "
                  f"{computed.latent_dataset} {computed.latent_shape}")
    table.add_row("ids used", f"{tokens.used_ids} of {tokens.vocabulary} ({tokens.utilisation:.2%})")
    if tokens.level_utilisation is not None:
        table.add_row("levels used per FSQ channel", " ".join(f"{u:.0%}" for u in tokens.level_utilisation))
    table.add_row("sequence lengths", ", ".join(f"{k}: {v}" for k, v in tokens.sequence_lengths.items()))
    table.add_row("entropy per sample (bits)", ", ".join(f"{k} {v:.3f}" for k, v in tokens.entropy_bits.items()))
    table.add_row("top ids", ", ".join(f"{int(i)} ({f:.2%})" for i, _, f in tokens.top_ids[:5]))
    table.add_row("lowest entropy", ", ".join(f"{s.sample_id} {s.entropy_bits:.2f}" for s in tokens.low_entropy[:3]))
    return table
