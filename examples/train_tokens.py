"""Train a tiny autoregressive next-token model on a discrete-token cache, on CPU, through LatentCacheDataset.

    python examples/train_tokens.py                     # builds a synthetic token cache in a temp folder
    python examples/train_tokens.py --cache /path/to/ROOT --steps 300   # a cache built with a cosmos-dv* tokenizer

The items' `tokens` (`flatten_tokens=True`: each modality's ids in (t, h, w) raster order) are one sequence per
sample, the modalities one after another. A causal transformer predicts token i+1 from tokens 0..i; the run
reports the held-out cross-entropy (nats per token) at step 0 and after training, and that of the unigram
baseline (every token predicted by its training-set frequency), which a model that learned anything beats.

A Cosmos DV id is a mixed-radix number of FSQ codes (8·8·8·5·5·5 = 64,000 ids). The model reads and predicts an
id as its FSQ digits: six small softmaxes instead of one over 64,000 ids (whose logits would cost most of the run)
and one set of weights shared by every id that has a digit in common, so the few thousand tokens of a small cache
teach it about ids it never saw. Each position also sees where it sits on the latent grid (modality, latent frame,
cell) and the id one latent frame above the token it predicts: consecutive latent frames repeat most of their ids.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from latentforge.dataset import LatentCacheDataset, SyntheticCacheSpec, collate_latent_batch, write_synthetic_cache
from latentforge.errors import LatentforgeError


class TinyTokenModel(nn.Module):
    """Ids in and out as FSQ digits, positions on the (modality, frame, row, column) grid, causal transformer layers.

    `levels`: the FSQ levels, first digit least significant (a cache without them: one digit of `vocabulary`
    levels); `grid`: one modality's (T', H', W'); `length`: the sequence (every modality's ids)."""

    def __init__(self, levels: tuple[int, ...], grid: tuple[int, int, int], length: int, width: int = 16,
                 layers: int = 1, heads: int = 4, dropout: float = 0.3):
        super().__init__()
        frames, height, width_cells = grid
        cells = height * width_cells
        self.levels, self.cells = tuple(levels), cells
        self.register_buffer("radix", torch.tensor([math.prod(levels[:c]) for c in range(len(levels))]))
        self.register_buffer("level", torch.tensor(levels))
        self.digits_in = nn.ModuleList(nn.Embedding(n, width) for n in levels)
        self.digits_above = nn.ModuleList(nn.Embedding(n, width) for n in levels)
        where = torch.arange(length + 1)  # one past the end: where the last prediction lands
        self.register_buffer("cell", where % cells)
        self.register_buffer("frame", where // cells % frames)
        self.register_buffer("stream", where // (cells * frames))
        self.cell_embedding = nn.Embedding(cells, width)
        self.frame_embedding = nn.Embedding(frames, width)
        self.stream_embedding = nn.Embedding(int(self.stream[-1]) + 1, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=dropout, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, sum(levels))  # one logit per level of each digit

    def digits(self, ids: torch.Tensor) -> torch.Tensor:
        """[...] ids -> [..., len(levels)] FSQ digits."""
        return ids[..., None] // self.radix % self.level

    def _embed(self, tables: nn.ModuleList, ids: torch.Tensor) -> torch.Tensor:
        digits = self.digits(ids)
        return sum(table(digits[..., c]) for c, table in enumerate(tables))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """[B, L] ids -> [B, L, sum(levels)] digit logits of the next id; position i sees ids 0..i only."""
        length = ids.shape[1]
        here = torch.arange(length)
        above = (here + 1 - self.cells).clamp(min=0)  # the next id's cell one latent frame earlier: at or before i
        has_above = (self.frame[1 : length + 1] > 0)[None, :, None]
        hidden = (self._embed(self.digits_in, ids) + has_above * self._embed(self.digits_above, ids[:, above])
                  + self.cell_embedding(self.cell[:length]) + self.frame_embedding(self.frame[:length])
                  + self.stream_embedding(self.stream[:length]))
        mask = nn.Transformer.generate_square_subsequent_mask(length)
        return self.head(self.norm(self.blocks(hidden, mask=mask, is_causal=True)))


def next_token_loss(model: TinyTokenModel, sequences: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats per token) of predicting each id from the ones before it: the model's probability of
    an id is the product of its digits' probabilities, so its cross-entropy is the sum of theirs."""
    logits = model(sequences[:, :-1]).split(model.levels, dim=-1)
    targets = model.digits(sequences[:, 1:])
    return sum(F.cross_entropy(part.reshape(-1, part.shape[-1]), targets[..., c].reshape(-1))
               for c, part in enumerate(logits))


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
    seconds: float  # the training steps alone

    @property
    def learned(self) -> bool:
        """The model beats predicting every token by its frequency."""
        return self.final_loss < self.unigram_loss


def sequences_of(dataset: LatentCacheDataset, indices: list[int]) -> torch.Tensor:
    """[N, M * T'H'W'] int64: each sample's modality streams one after another."""
    batch = collate_latent_batch([dataset[i] for i in indices])
    return batch["tokens"].reshape(len(indices), -1)


def default_held_out(samples: int) -> int:
    """A quarter of the cache, at most 8: the demo's 9 samples train on 7."""
    return max(1, min(8, samples // 4))


def train(root: str | Path, steps: int = 300, held_out: int | None = None, batch_size: int = 8, lr: float = 3e-3,
          seed: int = 0, log_every: int = 50, width: int = 16, layers: int = 1) -> TrainResult:
    # A model this small runs fastest on one thread: with two, the threads wait on each other at every small matmul
    # (measured 10x slower on a busy 2-core machine).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(root, steps, held_out, batch_size, lr, seed, log_every, width, layers)
    finally:
        torch.set_num_threads(threads)


def _train(root: str | Path, steps: int, held_out: int | None, batch_size: int, lr: float, seed: int, log_every: int,
           width: int, layers: int) -> TrainResult:
    dataset = LatentCacheDataset(root, flatten_tokens=True)
    held_out = default_held_out(len(dataset)) if held_out is None else held_out
    if len(dataset) <= held_out:
        raise LatentforgeError(f"the cache has {len(dataset)} samples, not more than held_out={held_out}")
    tokens = dataset.config.tokens
    train_rows = list(range(len(dataset) - held_out))
    held_rows = list(range(len(dataset) - held_out, len(dataset)))
    train_seqs, held_seqs = sequences_of(dataset, train_rows), sequences_of(dataset, held_rows)
    torch.manual_seed(seed)
    model = TinyTokenModel(tokens.levels or (tokens.vocabulary,), tokens.grid, train_seqs.shape[1], width, layers)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    generator = torch.Generator().manual_seed(seed)

    def held_loss() -> float:
        with torch.no_grad():
            return float(next_token_loss(model.eval(), held_seqs))

    step0 = held_loss()
    started = time.perf_counter()
    for step in range(steps):
        picked = torch.randperm(len(train_seqs), generator=generator)[:batch_size]
        loss = next_token_loss(model.train(), train_seqs[picked])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if log_every and (step + 1) % log_every == 0:
            print(f"step {step + 1}: train loss {loss.item():.3f}")
    seconds = time.perf_counter() - started
    return TrainResult(step0, held_loss(), unigram_loss(train_seqs, held_seqs, tokens.vocabulary), tokens.vocabulary,
                       held_rows, model, seconds)


def synthetic_token_cache(folder: Path) -> Path:
    """A 48-sample token cache: one 3x4x6 id grid per sample over a 256-id vocabulary (FSQ levels 4, 4, 4, 4)."""
    spec = SyntheticCacheSpec(num_samples=48, modalities=("rgb",), channels=1, vocabulary=256,
                              fsq_levels=(4, 4, 4, 4), text_name=None,
                              tokenizer={"name": "synthetic-tokens", "precision": "fp32"})
    return write_synthetic_cache(folder / "cache", spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", help="a discrete-token cache root (default: a synthetic one)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--held-out", type=int, help="samples held out (default: a quarter of the cache, at most 8)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = args.cache or synthetic_token_cache(Path(scratch))
        try:
            result = train(root, steps=args.steps, held_out=args.held_out)
        except LatentforgeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    print(f"held-out next-token loss (nats per token, {len(result.held_out)} samples): step 0 {result.step0_loss:.3f} "
          f"(ln V = {math.log(result.vocabulary):.3f}), after {args.steps} steps ({result.seconds:.1f} s) "
          f"{result.final_loss:.3f}, unigram baseline {result.unigram_loss:.3f}")
    if result.learned:
        print(f"the model beats the unigram baseline by {result.unigram_loss - result.final_loss:.3f} nats per token")
    else:
        print(f"warning: the model does not beat the unigram baseline ({result.final_loss:.3f} >= "
              f"{result.unigram_loss:.3f}): it learned no more than how often each id occurs; train on more samples "
              "or change --steps", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
