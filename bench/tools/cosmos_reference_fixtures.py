"""Make the Cosmos tokenizer test fixtures by running NVIDIA/Cosmos-Tokenizer's own modules (not ours).

For each case: the released `continuous_video` / `discrete_video` config with a tiny width, weights drawn from a
seeded generator (norm gains 1 + 0.2 N, biases 0.1 N, other weights N / sqrt(fan_in), rounded to float16; DV's
quant_conv then x4 so the ids spread over the vocabulary), uint8 pixels from `Generator(seed + 100)` mapped
v -> v / 127.5 - 1, then the reference's `encode` (and `decode`, or `decode_code` of a 2x2 corner of the ids).
Writes NAME.weights.safetensors (float16, the reference's key names), NAME.io.safetensors and
cosmos_fixtures.json into OUT; tests/tokenizers/test_cosmos_reference.py compares our modules with them.

    git --git-dir=COSMOS_TOKENIZER.git archive 3584ae752ce8ebdbe06a420bf60d7513c0e878cc cosmos_tokenizer \\
        | tar -x -C /tmp/cosmosref
    pip install --target /tmp/cosmosref/libs loguru
    python bench/tools/cosmos_reference_fixtures.py --reference /tmp/cosmosref --out tests/tokenizers/fixtures
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

COMMIT = "3584ae752ce8ebdbe06a420bf60d7513c0e878cc"
CASES = {
    "cosmos_cv8x8x8_tiny": dict(kind="CV", overrides=dict(channels=2, num_res_blocks=2, spatial_compression=8,
                                                          temporal_compression=8), frames=9, height=16, width=24,
                                seed=7),
    "cosmos_dv8x16x16_tiny": dict(kind="DV", overrides=dict(channels=2, num_res_blocks=1, spatial_compression=16,
                                                            temporal_compression=8, resolution=128),
                                  frames=9, height=32, width=64, seed=8),
}


def randomise(model, seed: int) -> None:
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                value = 1 + 0.2 * torch.randn(parameter.shape, generator=generator)
            elif name.endswith("bias"):
                value = 0.1 * torch.randn(parameter.shape, generator=generator)
            else:
                value = torch.randn(parameter.shape, generator=generator) / parameter[0].numel() ** 0.5
            parameter.copy_(value.half().float())


def run_case(name: str, case: dict, out: Path) -> dict:
    import torch
    from cosmos_tokenizer.networks.configs import continuous_video, discrete_video
    from cosmos_tokenizer.networks.continuous_video import CausalContinuousVideoTokenizer
    from cosmos_tokenizer.networks.discrete_video import CausalDiscreteVideoTokenizer
    from safetensors.torch import save_file

    continuous = case["kind"] == "CV"
    config = {**(continuous_video if continuous else discrete_video), **case["overrides"]}
    model = (CausalContinuousVideoTokenizer if continuous else CausalDiscreteVideoTokenizer)(**config).eval()
    randomise(model, case["seed"])
    if not continuous:
        with torch.no_grad():
            model.quant_conv.conv3d.weight.mul_(4.0)
    generator = torch.Generator().manual_seed(case["seed"] + 100)
    pixels = torch.randint(0, 256, (1, 3, case["frames"], case["height"], case["width"]), generator=generator,
                           dtype=torch.uint8)
    video = pixels.double().div(127.5).sub(1.0).float()
    with torch.no_grad():
        if continuous:
            latent = model.encode(video)[0]
            io = {"pixels": pixels, "latent": latent.contiguous(), "decoded": model.decode(latent).contiguous()}
        else:
            ids, codes, _ = model.encode(video)
            model.quantizer.dtype = torch.float32  # as model.to(dtype=torch.float32) sets it; codes are exact
            decoded = model.decode_code(ids[:, :, :2, :2])
            io = {"pixels": pixels, "ids": ids.contiguous(), "codes": codes.float().contiguous(),
                  "decoded_ids_2x2": decoded.float().contiguous()}
    save_file({k: v.half().contiguous() for k, v in model.state_dict().items()}, out / f"{name}.weights.safetensors")
    save_file(io, out / f"{name}.io.safetensors")
    return {"config": {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in config.items()},
            "seed": case["seed"], "input_seed": case["seed"] + 100,
            "pixels_to_input": "uint8 v -> v / 127.5 - 1 (float64, then float32)"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True,
                        help=f"a folder holding cosmos_tokenizer/ of NVIDIA/Cosmos-Tokenizer@{COMMIT} (and libs/)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    sys.path[:0] = [str(args.reference), str(args.reference / "libs")]
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"upstream": f"NVIDIA/Cosmos-Tokenizer@{COMMIT}",
            "cases": {name: run_case(name, case, args.out) for name, case in CASES.items()}}
    (args.out / "cosmos_fixtures.json").write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
