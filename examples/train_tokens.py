"""Train a tiny autoregressive next-token model on a discrete-token cache, on CPU, through LatentCacheDataset.

    python examples/train_tokens.py                     # builds a synthetic token cache in a temp folder
    python examples/train_tokens.py --cache /path/to/ROOT --steps 300   # a cache built with a cosmos-dv* tokenizer

The items' `tokens` (`flatten_tokens=True`: each modality's ids in (t, h, w) raster order) are one sequence per
sample, the modalities one after another. A causal transformer predicts token i+1 from tokens 0..i; the run
reports the held-out cross-entropy (nats per token) at step 0 and after training, and that of the unigram
baseline (every token predicted by its training-set frequency), which a model that learned anything beats.
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
from torch.nn import functional as F

from latentforge.dataset import LatentCacheDataset, SyntheticCacheSpec, collate_latent_batch, write_synthetic_cache
from latentforge.errors import LatentforgeError


class TinyTokenModel(nn.Module):
    """Token and position embeddings, causal transformer layers, a linear head over the vocabulary."""

    def __init__(self, vocabulary: int, length: int, width: int = 64, layers: int = 2, heads: int = 4):
        super().__init__()
        self.tokens = nn.Embedding(vocabulary, width)
        self.positions = nn.Parameter(torch.randn(length, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """[B, L] ids -> [B, L, vocabulary] logits; position i sees positions 0..i only (the causal mask)."""
        length = ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(length)
        hidden = self.blocks(self.tokens(ids) + self.positions[:length], mask=mask, is_causal=True)
        return self.head(hidden)


def next_token_loss(model: nn.Module, sequences: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting each token from the ones before it."""
    logits = model(sequences[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), sequences[:, 1:].reshape(-1))


def unigram_loss(train: torch.Tensor, held: torch.Tensor, vocabulary: int) -> float:
    """Cross-entropy of the held-out next tokens under the training tokens' frequencies (add-one smoothed)."""
    counts = torch.bincount(train[:, 1:].reshape(-1), minlength=vocabulary).double() + 1
    return float(-(counts / counts.sum()).log()[held[:, 1:].reshape(-1)].mean())


@dataclass
class TrainResult:
    step0_loss: float
    final_loss: float
    unigram_loss: float
    vocabulary: int
    held_out: list[int]
    model: nn.Module


def sequences_of(dataset: LatentCacheDataset, indices: list[int]) -> torch.Tensor:
    """[N, M * T'H'W'] int64: each sample's modality streams one after another."""
    batch = collate_latent_batch([dataset[i] for i in indices])
    return batch["tokens"].reshape(len(indices), -1)


def train(root: str | Path, steps: int = 200, held_out: int = 8, batch_size: int = 8, lr: float = 3e-3,
          seed: int = 0, log_every: int = 50, width: int = 64, layers: int = 2) -> TrainResult:
    dataset = LatentCacheDataset(root, flatten_tokens=True)
    if len(dataset) <= held_out:
        raise LatentforgeError(f"the cache has {len(dataset)} samples, not more than held_out={held_out}")
    vocabulary = dataset.config.tokens.vocabulary
    train_rows = list(range(len(dataset) - held_out))
    held_rows = list(range(len(dataset) - held_out, len(dataset)))
    train_seqs, held_seqs = sequences_of(dataset, train_rows), sequences_of(dataset, held_rows)
    torch.manual_seed(seed)
    model = TinyTokenModel(vocabulary, train_seqs.shape[1], width, layers)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)

    def held_loss() -> float:
        with torch.no_grad():
            return float(next_token_loss(model.eval(), held_seqs))

    step0 = held_loss()
    for step in range(steps):
        picked = torch.randint(len(train_seqs), (min(batch_size, len(train_seqs)),), generator=generator)
        loss = next_token_loss(model.train(), train_seqs[picked])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if log_every and (step + 1) % log_every == 0:
            print(f"step {step + 1}: train loss {loss.item():.3f}")
    return TrainResult(step0, held_loss(), unigram_loss(train_seqs, held_seqs, vocabulary), vocabulary,
                       held_rows, model)


def synthetic_token_cache(folder: Path) -> Path:
    """A 48-sample token cache: one 3x4x6 id grid per sample over a 256-id vocabulary (FSQ levels 4, 4, 4, 4)."""
    spec = SyntheticCacheSpec(num_samples=48, modalities=("rgb",), channels=1, vocabulary=256,
                              fsq_levels=(4, 4, 4, 4), text_name=None,
                              tokenizer={"name": "synthetic-tokens", "precision": "fp32"})
    return write_synthetic_cache(folder / "cache", spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", help="a discrete-token cache root (default: a synthetic one)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--held-out", type=int, default=8)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = args.cache or synthetic_token_cache(Path(scratch))
        try:
            result = train(root, steps=args.steps, held_out=args.held_out)
        except LatentforgeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    print(f"held-out next-token loss: step 0 {result.step0_loss:.3f} (ln V = {math.log(result.vocabulary):.3f}), "
          f"trained {result.final_loss:.3f}, unigram baseline {result.unigram_loss:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
