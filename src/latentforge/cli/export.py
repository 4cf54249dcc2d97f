"""`latentforge export CACHE --to musubi|musubi-hunyuanvideo|ltx2-trainer|ltx-video-trainer|pt-dicts DIR`: thin
wrapper over latentforge.export.export_cache."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("export", help="write each sample's files: musubi-tuner's Wan or "
                                   "HunyuanVideo cache, the LTX-2 or LTX-Video trainer's precomputed latents, or "
                                   "generic .pt dicts; rerun to resume")
    parser.add_argument("root", help="the cache root")
    # checked by export_cache, which names the allowed targets: a choices= list here would import the export
    # package, and torch with it, for every verb's parser
    parser.add_argument("--to", required=True, help="musubi | musubi-hunyuanvideo | ltx2-trainer | "
                        "ltx-video-trainer | pt-dicts (docs/export.md)")
    parser.add_argument("folder", help="the export folder (empty, or an earlier export of the same cache to resume)")
    parser.add_argument("--modality", action="append", help="export this modality (repeatable, stacked in the "
                        "order given; default: all of the cache's)")
    parser.add_argument("--force", action="store_true", help="export a cache the target's model cannot take (text "
                        "no Wan DiT takes, for musubi) anyway, with a warning")
    parser.add_argument("--musubi-task", help="musubi-tuner's image-to-video --task the export is for: i2v-14B "
                        "(Wan2.1: CLIP tokens and y) or i2v-A14B (Wan2.2: y); refuses a cache without them")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..export import export_cache
    from .common import say
    from .progress import progress_bars

    with progress_bars("samples") as bars:
        report = export_cache(args.root, args.to, args.folder, args.modality, bars.start, args.force,
                              args.musubi_task)
    say(f"exported {report.samples} samples to {report.folder}: {report.written} files written, "
        f"{report.skipped} already there")
    return 0
