"""Make the HunyuanVideo 1.5 official-checkpoint fixture by running Tencent-Hunyuan/HunyuanVideo-1.5's own VAE
module (not ours, not diffusers').

Builds `AutoencoderKLConv3D` (hyvideo/models/autoencoders/hunyuanvideo_15_vae.py) with `from_config` of a config.json
of the released keys and values, narrowed (block_out_channels 8-16-32-64-64; layers_per_block 2 as released, so the
decoder has three resnets per level), as the official pipeline builds it from vae/config.json. Sets its weights by
tests/helpers/hunyuan15_seeded.py (seed 0), encodes a 5x32x32 clip of uint8 noise (seed 1) in float32 on the CPU,
and records the posterior mean and the decoder's output of that mean. Writes into OUT:
hunyuanvideo15_official_tiny.json (upstream, commit, config.json, seeds, the module's state-dict names and shapes)
and hunyuanvideo15_official_tiny.io.safetensors (pixels, mean, decoded). The module imports loguru (installed beside
it) and `hyvideo.commons.parallel_states` (used only by the multi-GPU tiled decode, which does not run here):

    mkdir -p /tmp/hy15ref/upstream
    git --git-dir=HUNYUANVIDEO_1_5.git archive 60783e704160023913bee78f0b47036d393d4dfa hyvideo/__init__.py \\
        hyvideo/commons/__init__.py hyvideo/commons/parallel_states.py hyvideo/models/__init__.py \\
        hyvideo/models/autoencoders/__init__.py hyvideo/models/autoencoders/hunyuanvideo_15_vae.py \\
        | tar -x -C /tmp/hy15ref/upstream
    pip install --target /tmp/hy15ref/libs loguru
    PYTHONPATH=tests python bench/tools/hunyuanvideo15_reference_fixture.py --reference /tmp/hy15ref \\
        --out tests/tokenizers/fixtures
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

COMMIT = "60783e704160023913bee78f0b47036d393d4dfa"
NAME = "hunyuanvideo15_official_tiny"
# the released vae/config.json's keys and values, narrowed
CONFIG = {"_class_name": "AutoencoderKLConv3D", "block_out_channels": [8, 16, 32, 64, 64],
          "downsample_match_channel": True, "ffactor_spatial": 16, "ffactor_temporal": 4, "in_channels": 3,
          "latent_channels": 32, "layers_per_block": 2, "out_channels": 3, "sample_size": 256, "sample_tsize": 64,
          "scaling_factor": 1.03682, "shift_factor": None, "upsample_match_channel": True}
SEED, INPUT_SEED, CLIP = 0, 1, (1, 3, 5, 32, 32)


def run(out: Path) -> None:
    import torch
    from hyvideo.models.autoencoders.hunyuanvideo_15_vae import AutoencoderKLConv3D
    from safetensors.torch import save_file

    from helpers.hunyuan15_seeded import pixels, seeded_weights, to_input

    model = AutoencoderKLConv3D.from_config(CONFIG).eval()
    shapes = {k: list(v.shape) for k, v in model.state_dict().items()}
    model.load_state_dict(seeded_weights(shapes, SEED), strict=True)
    clip = pixels(CLIP, INPUT_SEED)
    with torch.no_grad():
        mean = model.encode(to_input(clip)).latent_dist.mode()
        decoded = model.decode(mean).sample
    save_file({"pixels": clip, "mean": mean.contiguous(), "decoded": decoded.contiguous()},
              out / f"{NAME}.io.safetensors")
    meta = {"upstream": f"Tencent-Hunyuan/HunyuanVideo-1.5@{COMMIT}",
            "module": "hyvideo/models/autoencoders/hunyuanvideo_15_vae.py:AutoencoderKLConv3D",
            "config": CONFIG, "seed": SEED, "input_seed": INPUT_SEED, "clip": list(CLIP),
            "torch": torch.__version__, "keys": shapes}
    (out / f"{NAME}.json").write_text(json.dumps(meta, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True,
                        help=f"a folder holding upstream/hyvideo of Tencent-Hunyuan/HunyuanVideo-1.5@{COMMIT} "
                             "and libs/")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    sys.path[:0] = [str(args.reference / "upstream"), str(args.reference / "libs")]
    args.out.mkdir(parents=True, exist_ok=True)
    run(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
