"""Encode of the hunyuanvideo, hunyuanvideo1.5, ltx-video and ltx2 tokenizers (models of the released
architectures with RANDOM WEIGHTS: diffusers' default configs, no real weights exist here) at their presets' shapes:
latentforge fp32 (TF32 off) and bf16 against diffusers' own class in fp32 and bf16 on the same weights, called as
the pipelines call it (whole clip, posterior mean, the pipeline's normalisation). Prints a table (s/clip, peak GiB,
rel-L2 and max-abs against latentforge fp32); writes JSON with --out. `--tiny` runs every measurement on the CPU
with narrow models and tiny clips.

On the GPU machine (docs/gpu-tests.md: the wheels in .whl/, diffusers among them), from the repository root:

    python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python3 bench/encode/encode_new_vaes.py --reps 3 --out $OUT/encode-new-vaes.json
    python bench/encode/encode_new_vaes.py --tiny        # checks the script on a CPU

`--tile SIZE STRIDE` encodes in spatial tiles (the presets' tokenizer.tiling=spatial): latentforge with that tile
rule, diffusers' class with its own enable_tiling at the same tile size and stride (HunyuanVideo 1.5 takes the
overlap as a fraction: (SIZE - STRIDE) / SIZE).
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import tempfile
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import diffusers  # noqa: E402
from _cosmos_bench_steps import clip, machine, timed_within  # noqa: E402

from latentforge import registry  # noqa: E402
from latentforge.devices import tf32_off  # noqa: E402
from latentforge.tokenizers.vae_tiling import TileRule  # noqa: E402

# tokenizer -> (diffusers class, preset shape); full size uses the class's default config (the released layout;
# LTX-Video's defaults are its 0.9.0 VAE)
MODELS = {
    "hunyuanvideo": ("AutoencoderKLHunyuanVideo", "129x544x960"),
    "hunyuanvideo1.5": ("AutoencoderKLHunyuanVideo15", "121x480x848"),
    "ltx-video": ("AutoencoderKLLTXVideo", "89x448x768"),
    "ltx2": ("AutoencoderKLLTX2Video", "121x512x768"),
}
TINY = {
    "hunyuanvideo": ({"block_out_channels": (8, 8, 8, 8), "norm_num_groups": 4, "layers_per_block": 1}, "9x16x24"),
    "hunyuanvideo1.5": ({"block_out_channels": (8, 16, 32, 64, 64), "layers_per_block": 1}, "9x32x32"),
    "ltx-video": ({"block_out_channels": (8, 8, 8, 8), "decoder_block_out_channels": (8, 8, 8, 8),
                   "layers_per_block": (1,) * 5, "decoder_layers_per_block": (1,) * 5}, "17x32x64"),
    "ltx2": ({"block_out_channels": (8, 16, 32, 64), "decoder_block_out_channels": (8, 16, 32),
              "layers_per_block": (1,) * 5, "decoder_layers_per_block": (1,) * 4}, "9x64x64"),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
diffusers.utils.logging.set_verbosity_error()  # its cast warns of float32 modules these classes do not have


def save_random(name: str, folder: Path, tiny: bool) -> Path:
    torch.manual_seed(0)
    model = getattr(diffusers, MODELS[name][0])(**(TINY[name][0] if tiny else {})).eval()
    if hasattr(model, "latents_mean"):  # statistics that do something, as the released ones do
        model.latents_mean.copy_(torch.randn(model.latents_mean.shape) * 0.3)
        model.latents_std.copy_(torch.rand(model.latents_std.shape) + 0.5)
    model.save_pretrained(folder)
    return folder


def diffusers_encoder(name: str, folder: Path, precision: str, device: torch.device, tile: list[int] | None):
    """diffusers' class, whole clip (or its own spatial tiles), then the pipeline's normalisation in float32 (in
    bf16 with the statistics the model's cast rounded to bf16, as a bf16 pipeline has them)."""
    vae = getattr(diffusers, MODELS[name][0]).from_pretrained(folder).to(device, DTYPES[precision]).eval()
    vae.use_framewise_encoding = False  # HunyuanVideo's default tiles clips of more than 16 frames
    if name == "hunyuanvideo1.5":
        vae.enable_slicing()  # its attention takes one clip per call
    if tile and "tile_overlap_factor" in inspect.signature(vae.enable_tiling).parameters:
        ratio = vae.spatial_compression_ratio
        vae.enable_tiling(tile_sample_min_height=tile[0], tile_sample_min_width=tile[0],
                          tile_latent_min_height=tile[0] // ratio, tile_latent_min_width=tile[0] // ratio,
                          tile_overlap_factor=(tile[0] - tile[1]) / tile[0])
    elif tile:
        vae.enable_tiling(tile_sample_min_height=tile[0], tile_sample_min_width=tile[0],
                          tile_sample_stride_height=tile[1], tile_sample_stride_width=tile[1])
    stats = None
    if hasattr(vae, "latents_mean"):
        stats = [vae.latents_mean.float().view(1, -1, 1, 1, 1), vae.latents_std.float().view(1, -1, 1, 1, 1)]
    factor = vae.config.scaling_factor

    def encode(video: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode(), tf32_off():
            mu = vae.encode(video.to(DTYPES[precision])).latent_dist.mode().float()
            return mu * factor if stats is None else (mu - stats[0]) * factor / stats[1]

    return encode


def measure(name: str, tiny: bool, device: torch.device, reps: int, budget_s: float, work: Path,
            precisions: list[str], errors: dict[str, str], tile: list[int] | None = None) -> list[dict]:
    """Each mode on its own: one that fails (out of memory) is reported in `errors` and the others still run.
    rel-L2 columns: against latentforge fp32 where it ran, and against the other library at the same precision."""
    folder = save_random(name, work / name, tiny)
    shape = TINY[name][1] if tiny else MODELS[name][1]
    video = clip(shape, device)
    rows, baseline = [], None
    for precision in precisions:
        outputs = {}
        for library in ("latentforge", "diffusers"):
            mode = f"{library} {precision}"
            try:
                if library == "latentforge":
                    fn = registry.resolve("tokenizer", name)(
                        str(folder), precision, device=device, tiling=TileRule(*tile) if tile else None).encode
                else:
                    fn = diffusers_encoder(name, folder, precision, device, tile)
                timing, out = timed_within(lambda fn=fn: fn(video), device, reps, budget_s)
                again = fn(video)  # the same bits twice
            except Exception:  # noqa: BLE001 - e.g. out of memory at this shape: the next mode still runs
                errors[f"{name} {mode}"] = traceback.format_exc()
                continue
            finally:
                fn = None
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            same = bool(torch.equal(out, again))
            out = outputs[library] = out.float().cpu()
            if baseline is None and mode == "latentforge fp32":
                baseline = out
            row = {"model": name, "mode": mode, "shape": shape, "tile": tile, "output_shape": list(out.shape), **timing,
                   "same_bits_twice": same}
            if baseline is not None:
                difference = out - baseline
                row.update(rel_l2_vs_latentforge_fp32=float(difference.norm() / baseline.norm()),
                           max_abs_vs_latentforge_fp32=float(difference.abs().max()))
            if len(outputs) == 2:
                ours = outputs["latentforge"]
                row["rel_l2_vs_latentforge_same_precision"] = float((out - ours).norm() / ours.norm())
            rows.append(row)
            print("row", json.dumps(row), flush=True)  # each row as it comes: a run cut short keeps them
    return rows


def print_table(result: dict) -> None:
    print(f"machine: {result['machine']}\nweights: {result['weights']}")
    print(f"{'model':<16} {'mode':<18} {'shape':<12} {'s/clip':>8} {'peak GiB':>9} {'rel-L2':>9} {'max-abs':>9} "
          f"{'vs ours':>9} {'same bits':>9}")
    for row in result["rows"]:
        peak = "-" if row["peak_gib"] is None else f"{row['peak_gib']:.1f}"
        print(f"{row['model']:<16} {row['mode']:<18} {row['shape']:<12} {row['s_per_clip']:>8.3f} {peak:>9} "
              f"{_e(row.get('rel_l2_vs_latentforge_fp32')):>9} {_e(row.get('max_abs_vs_latentforge_fp32')):>9} "
              f"{_e(row.get('rel_l2_vs_latentforge_same_precision')):>9} {str(row['same_bits_twice']):>9}")
    print("  rel-L2, max-abs: against latentforge fp32 (- where it did not run); vs ours: rel-L2 against latentforge "
          "at the same precision")
    for name, error in result["errors"].items():
        print(f"{name}: FAILED: {error.splitlines()[-1]}")


def _e(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="narrow models and tiny clips on the CPU")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--precisions", nargs="+", choices=list(DTYPES), default=list(DTYPES))
    parser.add_argument("--budget-s", type=float, default=120.0, help="time per mode; fewer reps where needed")
    parser.add_argument("--device", default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--tile", type=int, nargs=2, metavar=("SIZE", "STRIDE"), default=None,
                        help="spatial tiles of SIZE pixels every STRIDE pixels (default: the whole clip)")
    args = parser.parse_args(argv)
    device = torch.device(args.device or ("cpu" if args.tiny or not torch.cuda.is_available() else "cuda"))
    result = {"machine": machine(device), "weights": "random weights of the released architectures"
              + (" (narrow, --tiny)" if args.tiny else ""), "rows": [], "errors": {}}
    with tempfile.TemporaryDirectory() as work:
        for name in args.models:
            try:
                result["rows"] += measure(name, args.tiny, device, 1 if args.tiny else args.reps, args.budget_s,
                                          Path(work), args.precisions, result["errors"], args.tile)
            except Exception:  # noqa: BLE001 - one model's failure is reported, the others still run
                result["errors"][name] = traceback.format_exc()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    print_table(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
