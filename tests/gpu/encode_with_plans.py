"""The replaying process of test_plan_replay.py: one wan2.1 bf16 encode in a fresh interpreter, every convolution
run by the cuDNN plan the book in PLANS_DIR records for it (timed and recorded there where the book lacks one).

    python tests/gpu/encode_with_plans.py CHECKPOINT CLIP.pt PLANS_DIR LATENT.pt
"""

from __future__ import annotations

import sys

import torch

from latentforge.tokenizers.wan.wan21 import Wan21Tokenizer


def main(checkpoint: str, clip: str, plans_dir: str, latent: str) -> None:
    tokenizer = Wan21Tokenizer(checkpoint, precision="bf16", device="cuda", conv_kernels="plans",
                               conv_plans_dir=plans_dir)
    torch.save(tokenizer.encode(torch.load(clip).cuda()).cpu(), latent)


if __name__ == "__main__":
    main(*sys.argv[1:])
