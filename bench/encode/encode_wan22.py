"""Wan2.2 VAE encode (the released 4x16x16, 48-channel architecture, random weights): latentforge's `wan2.2`
tokenizer in fp32 (TF32 off) and bf16 (the fast path, with recorded cuDNN plans and with cuDNN's heuristics)
against diffusers' own bf16 encode of the same weights, at two clip sizes.
Prints s/clip, peak GiB and rel-L2 against fp32; writes JSON with --out. `--tiny` checks the script on the CPU.

    python bench/encode/encode_wan22.py --out wan22.json        # on a GPU
    python bench/encode/encode_wan22.py --tiny
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_common"))

from _encode_probes import timed  # noqa: E402
from _random_wan import spread_norms_and_biases  # noqa: E402

from latentforge.tokenizers.wan.wan22 import Wan22Tokenizer  # noqa: E402
from latentforge.tokenizers.wan.wan22_checkpoint import RELEASED_WIDTHS, diffusers_config  # noqa: E402


def random_wan22_vae(widths: dict, seed: int = 0):
    """diffusers' AutoencoderKLWan in the Wan2.2 configuration, random weights with spread gammas and biases."""
    from diffusers import AutoencoderKLWan

    torch.manual_seed(seed)
    vae = AutoencoderKLWan.from_config(diffusers_config(**widths)).eval()
    spread_norms_and_biases(vae)
    return vae


def smooth_clip(frames: int, height: int, width: int, device: torch.device) -> torch.Tensor:
    """A [1,3,T,H,W] clip in [-1,1] with image-like structure (blurred noise that drifts), not white noise."""
    generator = torch.Generator(device="cpu").manual_seed(1)
    coarse = torch.rand(1, 3, frames, height // 16 + 2, width // 16 + 2, generator=generator)
    clip = torch.nn.functional.interpolate(coarse, size=(frames, height, width), mode="trilinear")
    return (clip * 2 - 1).to(device)


def run(args) -> dict:
    device = torch.device(args.device)
    widths = {"base_dim": 8, "decoder_base_dim": 8} if args.tiny else dict(RELEASED_WIDTHS)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        vae = random_wan22_vae(widths)
        vae.save_pretrained(folder)  # a diffusers folder: the tokenizer loads it through its real loading code
        fp32 = Wan22Tokenizer(folder, "fp32", device=device)
        # the default: plans from the books shipped for this GPU, timed into a fresh folder (the warm-up call)
        plans = Wan22Tokenizer(folder, "bf16", device=device,
                               conv_plans_dir=str(args.plans_dir or Path(folder) / "conv-plans"))
        heuristics = Wan22Tokenizer(folder, "bf16", device=device, conv_kernels="heuristics")
        diffusers_bf16 = vae.to(device=device, dtype=torch.bfloat16)
        mean, inv_std = fp32._mean, fp32._inv_std
        for shape in args.shapes:
            frames, height, width = (int(v) for v in shape.split("x"))
            video = smooth_clip(frames, height, width, device)

            def diffusers_encode(v=video):
                with torch.inference_mode():
                    mu = diffusers_bf16.encode(v.to(torch.bfloat16)).latent_dist.mode()
                return (mu.float() - mean) * inv_std

            modes = {"latentforge wan2.2 fp32 (TF32 off)": lambda v=video: fp32.encode(v),
                     "latentforge wan2.2 bf16, cuDNN plans": lambda v=video: plans.encode(v),
                     "latentforge wan2.2 bf16, heuristics": lambda v=video: heuristics.encode(v),
                     "diffusers bf16": diffusers_encode}
            reference = None
            for name, fn in modes.items():
                seconds, peak, out = timed(fn, device, args.reps)
                reference = out if reference is None else reference
                rel = float((out - reference).norm() / reference.norm())
                rows.append({"mode": name, "shape": shape, "s_per_clip": seconds, "peak_gib": peak,
                             "rel_l2_vs_fp32": rel, "latent_shape": list(out.shape),
                             "same_bits_twice": torch.equal(fn(), out)})
                print(f"  done: {name} at {shape}: {seconds:.3f} s/clip, rel-L2 {rel:.3g}", flush=True)
    return {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "torch": torch.__version__,
            "widths": widths, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shapes", nargs="+", default=["93x480x832", "121x704x1280"])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plans-dir", type=Path, help="the shared plan books to use and keep (default: a fresh temp)")
    parser.add_argument("--tiny", action="store_true", help="CPU, width 8, 5x32x48: checks the script")
    args = parser.parse_args(argv)
    if args.tiny:
        args.device, args.shapes, args.reps = "cpu", ["5x32x48"], 1
    result = run(args)
    print(f"\nWan2.2 VAE (widths {result['widths']}) on {result['device']}, torch {result['torch']}")
    print(f"{'mode':<38} {'shape':<13} {'s/clip':>8} {'GiB':>7} {'rel-L2 vs fp32':>15} same bits twice")
    for r in result["rows"]:
        print(f"{r['mode']:<38} {r['shape']:<13} {r['s_per_clip']:8.3f} {r['peak_gib']:7.2f} "
              f"{r['rel_l2_vs_fp32']:15.3g} {r['same_bits_twice']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
