"""Loads a `latentforge export --to musubi-hunyuanvideo` folder with musubi-tuner's own dataset code, through the
dataset TOML that docs/export.md documents, as its HunyuanVideo trainer does (architecture "hv").

    python bench/tools/musubi_hunyuanvideo_check.py MUSUBI_CHECKOUT EXPORT_DIR [--cache CACHE_ROOT]

MUSUBI_CHECKOUT is a musubi-tuner source tree; its src/ goes first on sys.path. The interpreter needs musubi-tuner's
dataset dependencies (toml, voluptuous, opencv: docs/export.md has the command), and latentforge (src/ on
PYTHONPATH) for --cache. The script
1. loads EXPORT_DIR as it is with musubi's config_utils: musubi finds no training item, since it skips every
   latent file without its text file, which the export does not write;
2. links the export's latent files into a scratch cache directory and has musubi write a stand-in text file for
   each with its own HunyuanVideo writer (dataset/cache_io.py save_text_encoder_output_cache: random LLM states
   [L, 4096] with their mask and a CLIP-L vector [768], the shapes its text encoders give), then loads that
   directory and reads every batch: `latents` [B, 16, F', H', W'] float32 and the text keys its trainer reads;
3. with --cache, multiplies each batch's latents by musubi's own SCALING_FACTOR (hunyuan_model/vae.py), as
   hv_train_network.py scale_shift_latents does, and compares the product, in the cache's storage dtype, with the
   cache's latent of that sample (LatentCacheDataset): the latent training sees is the cache's.
It prints a table and exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_checkout import checkout_commit  # noqa: E402  (a sibling module)
from musubi_check import _musubi_dataset_group, for_export, print_checks  # noqa: E402  (a sibling script)

ARCHITECTURE = "hv"  # musubi-tuner's ARCHITECTURE_HUNYUAN_VIDEO
LLM_TOKENS, LLM_WIDTH, CLIP_WIDTH = 8, 4096, 768  # LLaVA-Llama-3's hidden states, CLIP-L's pooled output
TEXT_KEYS = {"llm", "llm_mask", "clipL"}


def stand_in_text(latent_dir: Path, cache_dir: Path) -> int:
    """musubi's own text-cache writer, given random features, for each latent file linked into cache_dir."""
    from musubi_tuner.dataset.cache_io import save_text_encoder_output_cache
    from musubi_tuner.dataset.image_video_dataset import ItemInfo

    generator = torch.Generator().manual_seed(0)
    count = 0
    for latent in sorted(latent_dir.glob(f"*_{ARCHITECTURE}.safetensors")):
        (cache_dir / latent.name).symlink_to(latent)
        item_key = "_".join(latent.name.split("_")[:-3])  # as prepare_for_training splits the name
        item = ItemInfo(item_key, f"stand-in caption {item_key}", (0, 0))
        item.text_encoder_output_cache_path = str(cache_dir / f"{item_key}_{ARCHITECTURE}_te.safetensors")
        llm = torch.randn(LLM_TOKENS, LLM_WIDTH, generator=generator).bfloat16()
        save_text_encoder_output_cache(item, llm, torch.ones(LLM_TOKENS, dtype=torch.bool), is_llm=True)
        clip = torch.randn(CLIP_WIDTH, generator=generator).bfloat16()
        save_text_encoder_output_cache(item, clip, None, is_llm=False)
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("musubi_checkout", type=Path)
    parser.add_argument("export_dir", type=Path)
    parser.add_argument("--cache", type=Path, help="the cache the export was made from: compare the latents")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.musubi_checkout / "src"))
    from musubi_tuner.hunyuan_model.vae import SCALING_FACTOR

    export_dir = args.export_dir.resolve()
    samples = len(list(export_dir.glob(f"*_{ARCHITECTURE}.safetensors")))
    cached, cache_latents = None, []
    if args.cache is not None:
        from latentforge.export.run import EXPORT_RECORD
        from latentforge.sinks.hdf5.dataset import LatentCacheDataset

        modalities = json.loads((export_dir / EXPORT_RECORD).read_text(encoding="utf-8"))["modalities"]
        cached = LatentCacheDataset(args.cache, modalities)
        cache_latents = [cached[i]["latent"] for i in range(len(cached))]
    rows: list[tuple[str, str, bool]] = []
    with tempfile.TemporaryDirectory() as scratch:
        videos = Path(scratch) / "no_videos"
        videos.mkdir()
        config = Path(scratch) / "dataset.toml"
        config.write_text(for_export(export_dir, videos, architecture=ARCHITECTURE), encoding="utf-8")
        alone = _musubi_dataset_group(config, ARCHITECTURE)
        rows.append(("the export alone (no text files)", f"{alone.num_train_items} training items of {samples} "
                     "latent files", alone.num_train_items == 0))
        cache_dir = Path(scratch) / "with_text"
        cache_dir.mkdir()
        stand_in_text(export_dir, cache_dir)
        config.write_text(for_export(cache_dir, videos, architecture=ARCHITECTURE), encoding="utf-8")
        group = _musubi_dataset_group(config, ARCHITECTURE)
        rows.append(("with musubi's text files", f"{group.num_train_items} training items of {samples} latent files",
                     group.num_train_items == samples))
        shapes, keys, seen, bad, equal = set(), set(), 0, 0, 0
        for index in range(len(group)):
            batch = group[index]
            latents = batch["latents"]
            keys |= set(batch)
            shapes.add(f"{list(latents.shape)} {latents.dtype}")
            bad += not (latents.dim() == 5 and latents.shape[1] == 16 and latents.dtype == torch.float32)
            seen += latents.shape[0]
            for latent in latents if cached is not None else ():  # a batch does not say which sample it holds
                scaled = latent * SCALING_FACTOR
                equal += any(torch.equal(scaled.to(stored.dtype), stored) for stored in cache_latents)
        rows.append(("batches read", f"{len(group)}; latents {', '.join(sorted(shapes))}; keys "
                     f"{' '.join(sorted(keys))}", bad == 0 and seen == samples and TEXT_KEYS <= keys))
        if cached is not None:
            rows.append((f"latents x {SCALING_FACTOR} (scale_shift_latents)", f"{equal} of {samples} equal to the "
                         f"cache's, in {cached.config.storage_dtype}", equal == samples))
    print(f"musubi-tuner {checkout_commit(args.musubi_checkout)}, export {export_dir}")
    return print_checks(rows)


if __name__ == "__main__":
    sys.exit(main())
