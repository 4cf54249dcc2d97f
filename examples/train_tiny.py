"""Train a tiny latent flow-matching model on a cache, on CPU, through LatentCacheDataset.

    python examples/train_tiny.py                      # builds a synthetic cache in a temp folder
    python examples/train_tiny.py --cache demo-cache/cache        # the cache `latentforge demo` built
    python examples/train_tiny.py --cache /path/to/ROOT --steps 300

Held-out rows default to a quarter of the cache (at most 16) and the batch size to 8, or to every training row
when there are fewer; values that cannot fit end the run with one line naming the value and the fix (exit 2).

The model predicts the rectified-flow velocity v = x1 - x0 of the cached latent x1 from x_t = (1 - t) x0 + t x1,
conditioned on the RGB latent frame 0 and the pooled text embedding. It reports, on held-out cache rows with
fixed noise, the loss at step 0, after training, and of always predicting the training set's mean velocity.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Subset

from latentforge.dataset import (
    CacheExpectation,
    LatentCacheDataset,
    ResumableSampler,
    SyntheticCacheSpec,
    collate_latent_batch,
    drop_captions,
    write_synthetic_cache,
)
from latentforge.errors import ConfigError, LatentforgeError

DEFAULT_BATCH_SIZE = 8
MAX_DEFAULT_HELD_OUT = 16


class TinyVelocityNet(nn.Module):
    def __init__(self, channels: int, cond_channels: int, text_dim: int, hidden: int = 64):
        super().__init__()
        self.inp = nn.Conv3d(channels + cond_channels, hidden, 3, padding=1)
        self.time = nn.Sequential(nn.Linear(16, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.text = nn.Linear(text_dim, hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.GroupNorm(8, hidden), nn.SiLU(), nn.Conv3d(hidden, hidden, 3, padding=1)) for _ in range(2)
        )
        self.out = nn.Conv3d(hidden, channels, 1)

    def forward(self, x_t, t, cond, text, text_mask):
        frequencies = torch.exp(torch.linspace(0.0, math.log(100.0), 8, device=t.device))
        angles = t[:, None] * frequencies[None]
        time = self.time(torch.cat([angles.sin(), angles.cos()], dim=1))
        weights = text_mask.to(text.dtype)[..., None]
        pooled = (text * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        cond = cond.expand(-1, -1, x_t.shape[2], -1, -1)
        h = self.inp(torch.cat([x_t, cond], dim=1)) + (time + self.text(pooled))[:, :, None, None, None]
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


def flow_matching_loss(model, batch: dict, noise: torch.Tensor, t: torch.Tensor, velocity=None) -> torch.Tensor:
    """MSE between the predicted (or a given constant `velocity`) and the true velocity x1 - x0."""
    x1 = batch["latent"].float()
    x_t = (1 - t)[:, None, None, None, None] * noise + t[:, None, None, None, None] * x1
    if velocity is None:
        cond, text = batch["conditioning_latent"].float(), batch["text_embeddings"].float()
        velocity = model(x_t, t, cond, text, batch["text_mask"])
    return ((velocity - (x1 - noise)) ** 2).mean()


@dataclass(frozen=True)
class Split:
    """Rows 0..train-1 train in batches of batch_size (every epoch has at least one); the last held_out rows
    are the held-out set."""

    train: int
    held_out: int
    batch_size: int


def split_cache(num_samples: int, held_out: int | None = None, batch_size: int | None = None) -> Split:
    """The held-out count and batch size for a cache of num_samples rows: the defaults shrink to fit small
    caches, explicit values that do not fit raise a ConfigError naming the value and the fix."""
    if num_samples < 2:
        raise ConfigError(f"the cache has {num_samples} sample(s); training needs at least 2 (one to train on, "
                          f"one held out)")
    if held_out is None:
        held_out = max(1, min(MAX_DEFAULT_HELD_OUT, num_samples // 4))
    elif not 1 <= held_out < num_samples:
        raise ConfigError(f"--held-out {held_out} does not fit a cache of {num_samples} samples; "
                          f"use --held-out 1..{num_samples - 1}")
    train = num_samples - held_out
    if batch_size is None:
        batch_size = min(DEFAULT_BATCH_SIZE, train)
    elif not 1 <= batch_size <= train:
        raise ConfigError(f"--batch-size {batch_size} does not fit the {train} training rows ({num_samples} "
                          f"samples, {held_out} held out); use --batch-size 1..{train} or a smaller --held-out")
    return Split(train, held_out, batch_size)


@dataclass
class Result:
    step0_loss: float
    final_loss: float
    mean_velocity_loss: float
    model: TinyVelocityNet
    held_out: list[int]


def train(root: str | Path, steps: int = 100, batch_size: int | None = None, lr: float = 2e-3,
          held_out: int | None = None, seed: int = 0, num_workers: int = 0, caption_dropout: float = 0.1,
          log_every: int = 50) -> Result:
    """batch_size and held_out: None picks what fits the cache (split_cache)."""
    # Convolutions this small gain nothing from intra-op threads and lose a lot when cores are shared.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(root, steps, batch_size, lr, held_out, seed, num_workers, caption_dropout, log_every)
    finally:
        torch.set_num_threads(threads)


def _train(root, steps, batch_size, lr, held_out, seed, num_workers, caption_dropout, log_every) -> Result:
    if steps < 1:
        raise ConfigError(f"--steps {steps}: train for at least 1 step")
    torch.manual_seed(seed)
    dataset = LatentCacheDataset(root)
    # What this trainer was built for; a resumed run would pass it as expect= to refuse any other cache.
    expectation: CacheExpectation = dataset.expectation
    split = split_cache(len(dataset), held_out, batch_size)
    print(f"{root}: {len(dataset)} samples, {split.train} to train on in batches of {split.batch_size}, "
          f"{split.held_out} held out; {steps} steps on the CPU")
    train_indices = list(range(split.train))
    train_set = Subset(dataset, train_indices)
    sampler = ResumableSampler(len(train_set), seed=seed)
    # batch_size <= len(train_set), so drop_last still leaves at least one batch per epoch.
    loader = DataLoader(train_set, batch_size=split.batch_size, sampler=sampler, collate_fn=collate_latent_batch,
                        num_workers=num_workers, drop_last=True)
    eval_batch = collate_latent_batch([dataset[i] for i in range(len(train_indices), len(dataset))])
    mean_x1 = torch.stack([dataset[i]["latent"].float() for i in train_indices]).mean(0)
    generator = torch.Generator().manual_seed(seed + 1)
    eval_noise = torch.randn(eval_batch["latent"].shape, generator=generator)
    eval_t = torch.rand(eval_noise.shape[0], generator=generator)

    cond_channels = eval_batch["conditioning_latent"].shape[1]
    model = TinyVelocityNet(dataset.latent_shape[0], cond_channels, eval_batch["text_embeddings"].shape[-1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.1)
    empty_prompt = dataset.empty_prompt()

    def held_out_loss(velocity=None) -> float:
        with torch.no_grad():
            return float(flow_matching_loss(model, eval_batch, eval_noise, eval_t, velocity))

    step0 = held_out_loss()
    step, epoch = 0, 0
    while step < steps:
        sampler.set_epoch(epoch)
        for batch in loader:
            drop_captions(batch, empty_prompt, caption_dropout, generator)
            noise = torch.randn(batch["latent"].shape)
            t = torch.rand(noise.shape[0])
            loss = flow_matching_loss(model, batch, noise, t)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            if log_every and step % log_every == 0:
                print(f"step {step:4d}  train loss {loss.item():.4f}  held-out {held_out_loss():.4f}")
            if step == steps:
                break
        epoch += 1
    print(f"trained for {expectation.tokenizer_family} latents {list(expectation.latent_shape or ())}")
    return Result(step0, held_out_loss(), held_out_loss(mean_x1.expand_as(eval_noise)), model,
                  list(range(len(train_indices), len(dataset))))


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 trained, 1 the cache cannot be read, 2 a value that does not fit (one line, no traceback)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", help="cache root (default: a synthetic cache in a temp folder)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch-size", type=int, help=f"default {DEFAULT_BATCH_SIZE}, fewer on a small cache")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--held-out", type=int, help="rows kept out of training (default a quarter of the "
                        f"cache, at most {MAX_DEFAULT_HELD_OUT})")
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            root = args.cache or write_synthetic_cache(Path(scratch) / "synthetic",
                                                      SyntheticCacheSpec(num_samples=96, rows_per_shard=32))
            result = train(root, args.steps, args.batch_size, args.lr, args.held_out, args.seed, args.num_workers)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except LatentforgeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"held-out loss: step 0 {result.step0_loss:.4f}  final {result.final_loss:.4f}  "
          f"mean-velocity baseline {result.mean_velocity_loss:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
