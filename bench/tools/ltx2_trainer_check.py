"""Loads a `latentforge export --to ltx2-trainer` folder with the LTX-2 trainer's own dataset and text-to-video
training code (Lightricks/LTX-2, packages/ltx-trainer and packages/ltx-core), the way its trainer does
(ltx_trainer/trainer.py _init_dataloader, _training_step).

    python bench/tools/ltx2_trainer_check.py LTX2_CHECKOUT EXPORT_DIR

LTX2_CHECKOUT is an LTX-2 source tree; its packages/ltx-trainer/src and packages/ltx-core/src go first on sys.path.
The interpreter needs torch, einops, rich and pydantic (latentforge's venv has them), not the trainer's models. The
script
1. opens EXPORT_DIR as the trainer's preprocessed data root with its PrecomputedDataset and the text-to-video
   strategy's data sources, and shows its refusal: the export writes no `conditions/`;
2. links the export's `latents/` into a scratch data root beside stand-in `conditions/` (random features under the
   keys the trainer's process_captions.py writes: video_prompt_embeds, audio_prompt_embeds, prompt_attention_mask;
   the Gemma features themselves need the trainer's text preprocessing), loads it with PrecomputedDataset and a
   DataLoader as its trainer does, and checks every batch's latents against the exported file;
3. runs the text-to-video strategy's prepare_training_inputs on each batch: the latent patchified by its
   patchifier to [B, F'H'W', 128] tokens (equal to the file's, rearranged), the positions built from num_frames,
   height, width and fps.
4. does the same with the flexible strategy of the trainer's shipped configs (configs/t2v_lora.yaml), its video
   block only;
5. where the export holds `audio_latents/` (a cache with LTX-2 audio latents), links them into the data root too
   and loads them with the sources of the shipped configs' full strategy (configs/t2v_lora.yaml: video and audio
   generated) and of the text-to-video strategy with `with_audio`: every batch's audio latents equal to the file's,
   patchified by the trainer's audio patchifier to [B, T, 128] tokens equal to the file's [8, T, 16] rearranged,
   and the strategies' audio inputs (noised latents, targets, positions) built from them. A sample without an audio
   file is left out of those datasets, as the trainer's own preprocessing leaves out a video without sound.
It prints a table and exits 1 when a check fails.
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

CHANNELS = 128  # the LTX-2 video latent's channels
TEXT_TOKENS, TEXT_WIDTH = 8, 3840  # stand-in text: Gemma-3's width, a few tokens


def stand_in_conditions(latents: Path, conditions: Path) -> int:
    """One conditions file per latent file, under the same relative name (PrecomputedDataset's pairing)."""
    generator = torch.Generator().manual_seed(0)
    count = 0
    for path in sorted(latents.glob("**/*.pt")):
        target = conditions / path.relative_to(latents)
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"video_prompt_embeds": torch.randn(TEXT_TOKENS, TEXT_WIDTH, generator=generator).bfloat16(),
                    "audio_prompt_embeds": torch.randn(TEXT_TOKENS, TEXT_WIDTH, generator=generator).bfloat16(),
                    "prompt_attention_mask": torch.ones(TEXT_TOKENS, dtype=torch.bool)}, target)
        count += 1
    return count


def audio_rows(root: Path, sampler: object) -> list[tuple[str, str, bool]]:
    """Step 5: the audio latents through the shipped full strategy and text-to-video with audio."""
    from ltx_trainer.datasets import PrecomputedDataset
    from ltx_trainer.training_strategies.flexible import FlexibleStrategy, FlexibleStrategyConfig, ModalityConfig
    from ltx_trainer.training_strategies.text_to_video import TextToVideoConfig, TextToVideoStrategy

    files = sorted((root / "audio_latents").glob("**/*.pt"))
    full = FlexibleStrategyConfig(name="flexible", video=ModalityConfig(is_generated=True, latents_dir="latents"),
                                  audio=ModalityConfig(is_generated=True, latents_dir="audio_latents"))
    with_audio = TextToVideoConfig(with_audio=True)
    rows: list[tuple[str, str, bool]] = []
    for name, config, strategy in (("flexible strategy, video and audio", full, FlexibleStrategy(full)),
                                   ("text-to-video with audio", with_audio, TextToVideoStrategy(with_audio))):
        dataset = PrecomputedDataset(str(root), data_sources=config.get_data_sources())
        shapes, tokens, positions = set(), set(), set()
        same = 0
        for batch, path in zip(DataLoader(dataset, batch_size=1, shuffle=False), files):
            audio = batch["audio_latents"]
            mine = torch.load(path, map_location="cpu", weights_only=True)
            shapes.add(f"{list(audio['latents'].shape)} {audio['latents'].dtype}")
            patchified = strategy._audio_patchifier.patchify(audio["latents"])  # what the strategy noises
            flat = mine["latents"].transpose(0, 1).flatten(1, 2)  # [C, T, F] -> [T, C*F]
            inputs = strategy.prepare_training_inputs(batch, sampler)
            tokens.add(f"{list(inputs.audio.latent.shape)}")
            positions.add(f"{list(inputs.audio.positions.shape)}")
            same += (torch.equal(audio["latents"][0], mine["latents"]) and torch.equal(patchified[0], flat)
                     and inputs.audio.latent.shape == inputs.audio_targets.shape == patchified.shape)
        rows.append((name, f"{len(dataset)} samples of {len(files)} audio files; audio latents "
                     f"{', '.join(sorted(shapes))}; audio tokens {', '.join(sorted(tokens))} (equal to the file's: "
                     f"{same}); positions {', '.join(sorted(positions))}",
                     len(dataset) == same == len(files) and all(s.endswith("torch.float32") for s in shapes)))
    return rows


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915  (one check after another)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ltx2_checkout", type=Path)
    parser.add_argument("export_dir", type=Path)
    args = parser.parse_args(argv)
    for package in ("ltx-core", "ltx-trainer"):
        sys.path.insert(0, str(args.ltx2_checkout / "packages" / package / "src"))
    from ltx_trainer.datasets import PrecomputedDataset
    from ltx_trainer.timestep_samplers import ShiftedLogitNormalTimestepSampler
    from ltx_trainer.training_strategies.flexible import FlexibleStrategy, FlexibleStrategyConfig, ModalityConfig
    from ltx_trainer.training_strategies.text_to_video import TextToVideoConfig, TextToVideoStrategy

    export_dir = args.export_dir.resolve()
    files = sorted((export_dir / "latents").glob("**/*.pt"))
    config = TextToVideoConfig()
    sources = config.get_data_sources()
    # the shipped configs' strategy, video only (their audio block removed: an export holds no audio latents)
    flexible_config = FlexibleStrategyConfig(name="flexible", video=ModalityConfig(is_generated=True,
                                                                                latents_dir="latents"), audio=None)
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
        loader = DataLoader(dataset, batch_size=1, shuffle=False)
        strategy = TextToVideoStrategy(config)
        sampler = ShiftedLogitNormalTimestepSampler()
        shapes, grids, fps_seen, tokens, positions = set(), set(), set(), set(), set()
        same = same_tokens = 0
        for batch, path in zip(loader, files):
            latents = batch["latents"]
            mine = torch.load(path, map_location="cpu", weights_only=True)
            shapes.add(f"{list(latents['latents'].shape)} {latents['latents'].dtype}")
            grids.add(tuple(int(latents[key][0]) for key in ("num_frames", "height", "width")))
            fps_seen.add(float(latents["fps"][0]))
            same += torch.equal(latents["latents"][0], mine["latents"])
            inputs = strategy.prepare_training_inputs(batch, sampler)
            video = inputs.video
            tokens.add(f"{list(video.latent.shape)}")
            positions.add(f"{list(video.positions.shape)}")
            flat = mine["latents"].flatten(1).transpose(0, 1)  # [C, F, H, W] -> [(F H W), C]
            patchified = strategy._video_patchifier.patchify(latents["latents"])  # what the strategy noises
            same_tokens += torch.equal(patchified[0], flat) and video.latent.shape == patchified.shape
        rows.append(("batches read", f"{len(files)}; latents {', '.join(sorted(shapes))}; latent grids "
                     f"{sorted(grids)}; fps {sorted(fps_seen)}",
                     all(s.endswith("torch.bfloat16") and f", {CHANNELS}, " in s for s in shapes)))
        rows.append(("latents as exported", f"{same} of {len(files)} equal to the file's tensor", same == len(files)))
        rows.append(("text-to-video inputs", f"video tokens {', '.join(sorted(tokens))}; positions "
                     f"{', '.join(sorted(positions))}", same_tokens == len(files)))
        flexible = FlexibleStrategy(flexible_config)
        dataset = PrecomputedDataset(str(root), data_sources=flexible_config.get_data_sources())
        shapes = set()
        for batch in DataLoader(dataset, batch_size=1, shuffle=False):
            shapes.add(f"{list(flexible.prepare_training_inputs(batch, sampler).video.latent.shape)}")
        rows.append(("flexible strategy, video only", f"{len(dataset)} samples; video tokens "
                     f"{', '.join(sorted(shapes))}", len(dataset) == len(files) and shapes == tokens))
        if (export_dir / "audio_latents").is_dir():
            (root / "audio_latents").symlink_to(export_dir / "audio_latents", target_is_directory=True)
            rows += audio_rows(root, sampler)
    print(f"LTX-2 {checkout_commit(args.ltx2_checkout)}, export {export_dir}")
    print("| check | result | as expected |\n|---|---|---|")
    for name, result, ok in rows:
        print(f"| {name} | {result} | {'yes' if ok else 'NO'} |")
    return 0 if all(ok for _, _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
