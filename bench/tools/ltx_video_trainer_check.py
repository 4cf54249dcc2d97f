"""Loads a `latentforge export --to ltx-video-trainer` folder with the LTX-Video trainer's own dataset and standard
training strategy (Lightricks/LTX-Video-Trainer, src/ltxv_trainer), the way its trainer does (trainer.py
_init_dataloader, _training_step).

    PYTHONPATH=EXTRA python bench/tools/ltx_video_trainer_check.py TRAINER_CHECKOUT EXPORT_DIR

TRAINER_CHECKOUT is an LTX-Video-Trainer source tree; its src/ goes first on sys.path. The interpreter needs
torch, diffusers, transformers, rich and pydantic (latentforge's venv has them) and optimum-quanto, which the
trainer's config imports (`pip install --target EXTRA --no-deps optimum-quanto`, then PYTHONPATH=EXTRA), not the
trainer's models. The script
1. opens EXPORT_DIR as the trainer's preprocessed data root with its PrecomputedDataset and the standard
   strategy's data sources, and shows its refusal: the export writes no `conditions/`;
2. links the export's `latents/` into a scratch data root beside stand-in `conditions/` (random features under the
   keys the trainer's process_captions.py writes: prompt_embeds [128, 4096], prompt_attention_mask; the T5-XXL
   features themselves need the trainer's caption preprocessing), loads it with PrecomputedDataset and a
   DataLoader as its trainer does, and checks every batch's latents against the exported file;
3. runs the standard strategy's prepare_batch on each batch (the trainer's text-to-video training step): its
   tokens, noise and first-frame conditioning mask laid over num_frames x height x width, and the trainer's
   prepare_video_coordinates for the same grid, which must give one position per token.
It prints a table and exits 1 when a check fails.

Run on CPU (torch 2.13.0+cpu, diffusers 0.42.1, transformers 5.24.0, pydantic 2.14.4, optimum-quanto 0.2.7) against
LTX-Video-Trainer 31b12733f51cb16b244d23f6552609f369aed883, on an export of a 3-sample `ltx-video` cache built from
the test suite's generated clips (9 frames of 64x32) with a small random model of the LTX-Video VAE's
architecture; exit status 0:

| check | result | as expected |
|---|---|---|
| the export alone | refused: Required conditions directory does not exist: EXPORT_DIR/conditions | yes |
| samples found | 3 of 3 latent files | yes |
| batches read | 3; latents [1, 4, 128] torch.bfloat16; latent grids [(2, 1, 2)]; fps [24.0] | yes |
| latents as exported | 3 of 3 equal to the file's tensor | yes |
| standard strategy batches | tokens [1, 4, 128], coordinates [1, 4, 3], rope scale [0.3333, 32.0, 32.0] | yes |
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_checkout import checkout_commit  # noqa: E402  (a sibling module)

CHANNELS = 128  # the LTX-Video latent's channels
TEXT_TOKENS, TEXT_WIDTH = 128, 4096  # the trainer's T5-XXL features: 128 tokens of 4096


def stand_in_conditions(latents: Path, conditions: Path) -> int:
    """One conditions file per latent file, under the same relative name (PrecomputedDataset's pairing)."""
    generator = torch.Generator().manual_seed(0)
    count = 0
    for path in sorted(latents.glob("**/*.pt")):
        target = conditions / path.relative_to(latents)
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"prompt_embeds": torch.randn(TEXT_TOKENS, TEXT_WIDTH, generator=generator).bfloat16(),
                    "prompt_attention_mask": torch.ones(TEXT_TOKENS, dtype=torch.bool)}, target)
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trainer_checkout", type=Path)
    parser.add_argument("export_dir", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.trainer_checkout / "src"))
    from ltxv_trainer.config import ConditioningConfig
    from ltxv_trainer.datasets import PrecomputedDataset
    from ltxv_trainer.ltxv_utils import prepare_video_coordinates
    from ltxv_trainer.timestep_samplers import ShiftedLogitNormalTimestepSampler
    from ltxv_trainer.training_strategies import StandardTrainingStrategy

    export_dir = args.export_dir.resolve()
    files = sorted((export_dir / "latents").glob("**/*.pt"))
    strategy = StandardTrainingStrategy(ConditioningConfig())
    sources = strategy.get_data_sources()
    rows: list[tuple[str, str, bool]] = []
    try:
        PrecomputedDataset(str(export_dir), data_sources=sources)
        rows.append(("the export alone", "accepted", False))
    except FileNotFoundError as error:
        rows.append(("the export alone", f"refused: {error}", "conditions" in str(error)))
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "latents").symlink_to(export_dir / "latents", target_is_directory=True)
        stand_in_conditions(export_dir / "latents", root / "conditions")
        dataset = PrecomputedDataset(str(root), data_sources=sources)
        rows.append(("samples found", f"{len(dataset)} of {len(files)} latent files", len(dataset) == len(files)))
        sampler = ShiftedLogitNormalTimestepSampler()
        shapes, grids, fps_seen, batches = set(), set(), set(), set()
        same = fits = 0
        # the dataset's own order (an unsorted glob), each batch beside the file it names
        paths = [export_dir / "latents" / each for each in dataset.sample_files["latents"]]
        for batch, path in zip(DataLoader(dataset, batch_size=1, shuffle=False), paths):
            latents = batch["latents"]
            mine = torch.load(path, map_location="cpu", weights_only=True)
            shapes.add(f"{list(latents['latents'].shape)} {latents['latents'].dtype}")
            grid = tuple(int(latents[key][0]) for key in ("num_frames", "height", "width"))
            grids.add(grid)
            fps_seen.add(float(latents["fps"][0]))
            same += torch.equal(latents["latents"][0], mine["latents"])
            training = strategy.prepare_batch(batch, sampler)
            coords = prepare_video_coordinates(*grid, batch_size=1)
            batches.add(f"tokens {list(training.latents.shape)}, coordinates {list(coords.shape)}, "
                        f"rope scale {[round(x, 4) for x in training.rope_interpolation_scale]}")
            tokens = grid[0] * grid[1] * grid[2]
            fits += (training.latents.shape == (1, tokens, CHANNELS) and training.sequence_length == tokens
                     and coords.shape[1] == tokens and int(training.conditioning_mask.shape[1]) == tokens)
        rows.append(("batches read", f"{len(files)}; latents {', '.join(sorted(shapes))}; latent grids "
                     f"{sorted(grids)}; fps {sorted(fps_seen)}",
                     all(s.endswith(f", {CHANNELS}] torch.bfloat16") for s in shapes)))
        rows.append(("latents as exported", f"{same} of {len(files)} equal to the file's tensor", same == len(files)))
        rows.append(("standard strategy batches", "; ".join(sorted(batches)), fits == len(files)))
    print(f"LTX-Video-Trainer {checkout_commit(args.trainer_checkout)}, export {export_dir}")
    print("| check | result | as expected |\n|---|---|---|")
    for name, result, ok in rows:
        print(f"| {name} | {result} | {'yes' if ok else 'NO'} |")
    return 0 if all(ok for _, _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
