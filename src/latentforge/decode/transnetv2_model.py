"""TransNetV2 (Souček & Lokoč, "TransNet V2: An effective deep network architecture for fast shot transition
detection", 2020) as a PyTorch module, for inference only.

The architecture is the paper's default configuration (F=16 filters, L=3 stages of S=2 dilated blocks, D=1024), with
its frame-similarity and colour-histogram features and both heads. Module and parameter names follow the official
PyTorch port (github.com/soCzech/TransNetV2, inference-pytorch/), so the state dict its convert_weights.py makes from
the official TensorFlow weights loads here with an exact key check (decode/transnetv2_weights.py).

Input: uint8 [B, T, 27, 48, 3] RGB frames. Output: the logits of the single-frame head (a transition's middle frame)
and of the all-frames head (every frame of a transition), each float32 [B, T].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

INPUT_HEIGHT, INPUT_WIDTH = 27, 48
DILATIONS = (1, 2, 4, 8)
LOOKUP_WINDOW = 101  # the similarity features compare a frame with the 50 before and the 50 after it
FILTERS, STAGES, DENSE = 16, 3, 1024
HISTOGRAM_BINS = 512  # 8 levels per channel (the top 3 bits of R, G and B)


class _SeparableConv(nn.Module):
    """A (2+1)D convolution: 3x3 in space to 2F channels, then 3 taps in time `dilation` frames apart to F."""

    def __init__(self, channels: int, filters: int, dilation: int):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.Conv3d(channels, 2 * filters, (1, 3, 3), padding=(0, 1, 1), bias=False),
            nn.Conv3d(2 * filters, filters, (3, 1, 1), dilation=(dilation, 1, 1), padding=(dilation, 0, 0),
                      bias=False),
        ])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers[1](self.layers[0](x))


class _DilatedBlock(nn.Module):
    """Four separable convolutions of temporal dilation 1, 2, 4 and 8 side by side, concatenated, batch-normed."""

    def __init__(self, channels: int, filters: int, relu: bool):
        super().__init__()
        for dilation in DILATIONS:
            setattr(self, f"Conv3D_{dilation}", _SeparableConv(channels, filters, dilation))
        self.bn = nn.BatchNorm3d(4 * filters, eps=1e-3)  # Keras' epsilon, which the weights were trained with
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn(torch.cat([getattr(self, f"Conv3D_{d}")(x) for d in DILATIONS], dim=1))
        return F.relu(x) if self.relu else x


class _Stage(nn.Module):
    """Two dilated blocks with a shortcut from the first block's output, then 2x2 spatial average pooling."""

    def __init__(self, channels: int, filters: int):
        super().__init__()
        self.DDCNN = nn.ModuleList([_DilatedBlock(channels, filters, relu=True),
                                    _DilatedBlock(4 * filters, filters, relu=False)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first = self.DDCNN[0](x)
        return F.avg_pool3d(F.relu(self.DDCNN[1](first)) + first, (1, 2, 2))


def _lookup(similarities: torch.Tensor) -> torch.Tensor:
    """[B, T, T] pairwise similarities -> [B, T, LOOKUP_WINDOW]: row t holds frame t's similarity to frames
    t - 50 .. t + 50, zero where those lie outside the window."""
    batch, frames, _ = similarities.shape
    half = LOOKUP_WINDOW // 2
    padded = F.pad(similarities, (half, half))
    index = torch.arange(frames, device=similarities.device)[:, None] + torch.arange(LOOKUP_WINDOW,
                                                                                     device=similarities.device)
    return padded.gather(2, index.expand(batch, frames, LOOKUP_WINDOW))


class _FrameSimilarity(nn.Module):
    """Cosine similarities of the frames' pooled features (every stage's), projected to 128 numbers per frame."""

    def __init__(self, channels: int):
        super().__init__()
        self.projection = nn.Linear(channels, 128)
        self.fc = nn.Linear(LOOKUP_WINDOW, 128)

    def forward(self, stage_outputs: list[torch.Tensor]) -> torch.Tensor:
        pooled = torch.cat([out.mean(dim=(3, 4)) for out in stage_outputs], dim=1).transpose(1, 2)  # [B, T, C]
        embedded = F.normalize(self.projection(pooled), p=2, dim=2)
        return F.relu(self.fc(_lookup(embedded @ embedded.transpose(1, 2))))


class _ColorHistograms(nn.Module):
    """Cosine similarities of the frames' 512-bin RGB histograms, projected to 128 numbers per frame."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(LOOKUP_WINDOW, 128)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        batch, count = frames.shape[:2]
        rgb = frames.reshape(batch * count, -1, 3).long() >> 5
        bins = (rgb[..., 0] << 6) + (rgb[..., 1] << 3) + rgb[..., 2]
        offset = torch.arange(batch * count, device=frames.device)[:, None] * HISTOGRAM_BINS
        counts = torch.bincount((bins + offset).reshape(-1), minlength=batch * count * HISTOGRAM_BINS)
        histograms = F.normalize(counts.reshape(batch, count, HISTOGRAM_BINS).float(), p=2, dim=2)
        return F.relu(self.fc(_lookup(histograms @ histograms.transpose(1, 2))))


class TransNetV2(nn.Module):
    """uint8 [B, T, 27, 48, 3] RGB frames -> (single-frame logits, all-frames logits), each float32 [B, T]."""

    def __init__(self):
        super().__init__()
        widths = [FILTERS * 2**i for i in range(STAGES)]  # 16, 32, 64 filters: 64, 128, 256 channels out
        self.SDDCNN = nn.ModuleList([_Stage(3 if i == 0 else 4 * widths[i - 1], w) for i, w in enumerate(widths)])
        self.frame_sim_layer = _FrameSimilarity(sum(4 * w for w in widths))
        self.color_hist_layer = _ColorHistograms()
        spatial = (INPUT_HEIGHT // 2**STAGES) * (INPUT_WIDTH // 2**STAGES)  # 3 x 6 after three 2x2 poolings
        self.fc1 = nn.Linear(4 * widths[-1] * spatial + 128 + 128, DENSE)
        self.cls_layer1 = nn.Linear(DENSE, 1)
        self.cls_layer2 = nn.Linear(DENSE, 1)
        self.eval()

    def forward(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if frames.dtype != torch.uint8 or frames.ndim != 5 or tuple(frames.shape[2:]) != (INPUT_HEIGHT,
                                                                                          INPUT_WIDTH, 3):
            raise ValueError(f"TransNetV2 reads uint8 [B, T, {INPUT_HEIGHT}, {INPUT_WIDTH}, 3] RGB frames, got "
                             f"{frames.dtype} {list(frames.shape)}")
        x = frames.permute(0, 4, 1, 2, 3).float() / 255.0  # [B, 3, T, H, W]
        stage_outputs = []
        for stage in self.SDDCNN:
            x = stage(x)
            stage_outputs.append(x)
        batch, _, count = x.shape[:3]
        # per frame: the last stage's features flattened as (height, width, channel), as the official weights expect
        spatial = x.permute(0, 2, 3, 4, 1).reshape(batch, count, -1)
        features = torch.cat([self.color_hist_layer(frames), self.frame_sim_layer(stage_outputs), spatial], dim=2)
        hidden = F.relu(self.fc1(features))  # dropout is a no-op at inference
        return self.cls_layer1(hidden)[..., 0], self.cls_layer2(hidden)[..., 0]
