"""`latentforge cosmos t5|batch-json`: thin wrappers over latentforge.integrations.cosmos."""

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
    t5.add_argument("--padding", choices=("max_length", "none"), default="max_length",
                    help="max_length: Cosmos' own call, bit-identical to its script (default); none: each prompt at "
                    "its own length, faster, equal within float rounding")
    t5.add_argument("--device", default="auto", help="auto (default: cuda when torch sees a GPU, else cpu), cpu, "
                    "cuda or cuda:N")
    t5.set_defaults(run=run)

    batch = verbs.add_parser("batch-json", help="write the --batch_input_json list from image/video + .txt pairs")
    batch.add_argument("input_dir")
    batch.add_argument("--out", required=True, help="the JSON file to write")
    batch.add_argument("--save-dir", required=True, help="folder the generated videos go to (<stem>.mp4)")
    batch.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .common import say

    if args.cosmos_verb == "batch-json":
        from ..integrations.cosmos.batch_json import write_batch_json

        report = write_batch_json(args.input_dir, args.out, args.save_dir)
        say(f"wrote {len(report.entries)} entries to {args.out}")
        if report.missing_prompt:
            say(f"skipped {len(report.missing_prompt)} without a .txt (or ..txt) prompt: "
                + ", ".join(report.missing_prompt))
        return 0
    from ..devices import choose_device, device_note
    from ..integrations.cosmos.t5_pickles import cosmos_t5
    from .progress import progress_bars

    device = choose_device(args.device)
    say(f"encoding prompts {device_note(device)}")
    with progress_bars("prompts") as bars:
        report = cosmos_t5(args.dataset_dir, args.t5, args.metadata_csv, args.prompt_prefix, args.precision,
                           args.max_length, device, bars.start, args.padding)
    if args.metadata_csv is not None:
        say(f"wrote {len(report.metas_written)} prompt files to {report.folder.parent / 'metas'}")
    say(f"wrote {len(report.written)} pickles to {report.folder} ({len(report.skipped)} already there, kept)")
    return 0
