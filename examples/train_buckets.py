"""Train the tiny latent flow-matching model of train_tiny.py on a bucketed cache (one cache per shape), on CPU.

    latentforge build --config my-buckets.yaml --out cache          # frames.buckets: [[17, 32, 64], ...]
    python examples/train_buckets.py --cache cache --steps 50 --batch-size 4
    python examples/train_buckets.py --cache cache --token-budget 4096

Every batch comes from one bucket (BucketBatchSampler), so its latents share a shape; the model is fully
convolutional and takes each bucket's shape as it comes. It prints which bucket each step drew and its loss.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_tiny import TinyVelocityNet, flow_matching_loss  # noqa: E402  (the example next to this one)

from latentforge.dataset import BucketBatchSampler, BucketedLatentDataset, collate_latent_batch  # noqa: E402
from latentforge.errors import ConfigError, LatentforgeError  # noqa: E402


@dataclass
class BucketRun:
    draws: list[tuple[str, int]] = field(default_factory=list)  # (bucket, batch size) of every step
    losses: list[float] = field(default_factory=list)
    sampler_state: dict = field(default_factory=dict)  # what a checkpoint would save to resume mid-epoch


def train_buckets(root: str | Path, steps: int = 20, batch_size: int | None = 2, token_budget: int | None = None,
                  lr: float = 2e-3, seed: int = 0, log_every: int = 10) -> BucketRun:
    if steps < 1:
        raise ConfigError(f"--steps {steps}: train for at least 1 step")
    torch.manual_seed(seed)
    dataset = BucketedLatentDataset(root)
    sampler = BucketBatchSampler(dataset.bucket_sizes, None if token_budget else batch_size,
                                 token_budget=token_budget, tokens_per_sample=dataset.tokens_per_sample, seed=seed)
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collate_latent_batch)
    print(f"{root}: {len(dataset)} samples in buckets {dataset.bucket_sizes}, batch sizes "
          f"{dict(zip(sampler.names, sampler.batch_sizes))}")
    first = dataset[0]
    model = TinyVelocityNet(first["latent"].shape[0], first["conditioning_latent"].shape[0],
                            first["text_embeddings"].shape[-1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    run, epoch, consumed = BucketRun(), 0, 0
    while len(run.draws) < steps:
        sampler.set_epoch(epoch)
        consumed = 0
        for batch in loader:
            noise = torch.randn(batch["latent"].shape)
            loss = flow_matching_loss(model, batch, noise, torch.rand(noise.shape[0]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            consumed += 1
            run.draws.append((batch["bucket"][0], batch["latent"].shape[0]))
            run.losses.append(loss.item())
            if log_every and len(run.draws) % log_every == 0:
                print(f"step {len(run.draws):4d}  {run.draws[-1][0]} x{run.draws[-1][1]}  loss {loss.item():.4f}")
            if len(run.draws) == steps:
                break
        else:
            epoch += 1
    run.sampler_state = sampler.state_dict(consumed=consumed)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", required=True, help="a bucketed cache root (it holds buckets.json)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--token-budget", type=int, help="latent positions per batch instead of a batch size")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        run = train_buckets(args.cache, args.steps, args.batch_size, args.token_budget, seed=args.seed)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except LatentforgeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{len(run.draws)} steps from buckets {sorted({name for name, _ in run.draws})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
