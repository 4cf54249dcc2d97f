"""`latentforge preview ROOT --samples K`: thin wrapper over latentforge.report.preview.preview."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("preview", help="decode K samples next to their sources: an mp4 and a PNG sheet")
    parser.add_argument("root")
    parser.add_argument("--samples", type=int, default=4, help="samples spread evenly over the cache (default 4)")
    parser.add_argument("--index", type=int, action="append", help="preview this dataset_index (repeatable)")
    parser.add_argument("--out", help="folder for preview.mp4 and preview.png (default ROOT/build/preview)")
    parser.add_argument("--device", default="auto", help="auto (default: cuda when torch sees a GPU, else cpu) | "
                      "cpu | cuda | cuda:N")
    parser.add_argument("--dataset", action="append", help="the dataset's location now, if it moved")
    parser.add_argument("--tokenizer-checkpoint", help="the tokenizer checkpoint on this machine")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..cache.root import CacheRoot
    from ..devices import choose_device, device_note
    from ..report.preview import preview
    from ..verification.reencode import Overrides
    from .common import say
    from .progress import progress_bars

    CacheRoot.of(args.root).require_cache()  # a root that is no cache: its one line before the device note
    overrides = Overrides(tuple(args.dataset or ()), args.tokenizer_checkpoint, None, choose_device(args.device))
    say(f"decoding {device_note(overrides.device)}")
    with progress_bars("samples") as bars:
        made = preview(args.root, args.samples, Path(args.out) if args.out else None, overrides, args.index,
                       bars.start)
    say(f"previewed dataset_index {', '.join(map(str, made.dataset_indices))}; wrote:")
    say(f"  {made.video}  (every frame; per modality: source | reconstruction)")
    say(f"  {made.sheet}  (per sample and modality: source above reconstruction, a few frames across)")
    return 0
