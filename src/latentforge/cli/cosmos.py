"""`latentforge cosmos t5|batch-json`: thin wrappers over latentforge.cosmos_tools."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("cosmos", help="Cosmos-Predict2 side files: T5 pickles, batch-inference JSON")
    verbs = parser.add_subparsers(dest="cosmos_verb", required=True)

    t5 = verbs.add_parser("t5", help="write t5_xxl/<stem>.pickle for every prompt of a Cosmos dataset folder")
    t5.add_argument("dataset_dir")
    t5.add_argument("--t5", required=True, help="local T5 model folder (config.json, weights, tokenizer)")
    t5.add_argument("--metadata-csv", help="GR00T metadata.csv: write metas/<stem>.txt from it first")
    t5.add_argument(
        "--prompt-prefix",
        help='prepended to each metadata.csv prompt (default, as Cosmos: "The robot arm is performing a task. ")',
    )
    t5.add_argument("--precision", default="fp32", help="fp32 (Cosmos' default) or bf16")
    t5.add_argument("--max-length", type=int, default=512)
    t5.add_argument("--batch-size", type=int, default=16, help="prompts per encoder call")
    t5.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    t5.set_defaults(run=run)

    batch = verbs.add_parser("batch-json", help="write the --batch_input_json list from image/video + .txt pairs")
    batch.add_argument("input_dir")
    batch.add_argument("--out", required=True, help="the JSON file to write")
    batch.add_argument("--save-dir", required=True, help="folder the generated videos go to (<stem>.mp4)")
    batch.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    if args.cosmos_verb == "batch-json":
        from ..cosmos_tools import write_batch_json

        report = write_batch_json(args.input_dir, args.out, args.save_dir)
        console.print(f"wrote {len(report.entries)} entries to {args.out}")
        if report.missing_prompt:
            console.print(f"[yellow]skipped {len(report.missing_prompt)} without a .txt prompt:[/yellow] "
                          + ", ".join(report.missing_prompt))
        return 0
    return _run_t5(args, console)


def _run_t5(args: argparse.Namespace, console) -> int:
    import torch

    from ..cosmos_tools import GROOT_PROMPT_PREFIX, write_t5_pickles
    from ..errors import ConfigError
    from ..text.t5 import T5TextEncoder

    if args.prompt_prefix is not None and args.metadata_csv is None:
        raise ConfigError("--prompt-prefix applies to --metadata-csv prompts only; metas/*.txt are used as written")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    encoder = T5TextEncoder(args.t5, precision=args.precision, max_length=args.max_length,
                            batch_size=args.batch_size, device=device)
    prefix = GROOT_PROMPT_PREFIX if args.prompt_prefix is None else args.prompt_prefix
    report = write_t5_pickles(args.dataset_dir, encoder, metadata_csv=args.metadata_csv, prompt_prefix=prefix)
    if args.metadata_csv is not None:
        console.print(f"metas/*.txt written: {len(report.metas_written)}")
    console.print(f"t5_xxl pickles written: {len(report.written)}, already present (skipped): {len(report.skipped)}")
    return 0
