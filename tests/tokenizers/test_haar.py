"""haar-4x8x8: decode(encode(x)) is the orthogonal projection onto the documented patterns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.measure import block_reduce
from skimage.metrics import peak_signal_noise_ratio

from latentforge import registry
from latentforge.config import TokenizerConfig
from latentforge.errors import ConfigError
from latentforge.tokenizers.haar import HaarTokenizer


@pytest.fixture(scope="module")
def tok():
    return HaarTokenizer("cpu")


def _random_video(seed, frames=9, height=16, width=24):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(2, 3, frames, height, width, generator=generator) * 2 - 1


def _smooth_video(frames=17, height=48, width=64):
    t, y, x = np.meshgrid(np.arange(frames), np.arange(height), np.arange(width), indexing="ij")
    colours = [np.sin(0.21 * x + 0.13 * y + 0.3 * t), np.cos(0.17 * y - 0.11 * x + 0.2 * t),
               np.sin(0.09 * (x + y) - 0.25 * t + 1.0)]
    return np.stack(colours)[None].astype(np.float32) * 0.9  # [1,3,T,H,W] in [-1,1]


def test_latents_of_table_pixels_are_the_exact_sums_rounded_once(tok):
    """The same bits on any CPU: the float64 sums equal the exact integer sums (pixels from the uint8 table are
    float32 multiples of 2^-31), so only the last scale and the cast to float32 round, once each."""
    from latentforge.tokenizers.base import PIXEL_TABLE
    from latentforge.tokenizers.haar import block_patterns

    values = torch.randint(0, 256, (2, 3, 5, 16, 24), generator=torch.Generator().manual_seed(3))
    video = PIXEL_TABLE[values]
    integers = (video.double() * 2**31).long()
    assert torch.equal(integers.double() / 2**31, video.double())  # the table is on that grid
    expected = []
    for part, frames in ((integers[:, :, :1], 1), (integers[:, :, 1:], 4)):  # frame 0 alone, then groups of 4
        part = part.reshape(2, 3, -1, frames, 2, 8, 3, 8)
        patterns = block_patterns(frames)
        signs = torch.sign(patterns).long()
        sums = torch.einsum("bcngiyjx,kcgyx->bknij", part, signs)  # int64: exact in any order
        scale = patterns.abs().amax(dim=(1, 2, 3, 4)).view(1, 16, 1, 1, 1) / (frames * 64)
        expected.append((sums.double() / 2**31 * scale).float())
    assert torch.equal(tok.encode(video), torch.cat(expected, dim=2))


def test_registered_geometry_and_fingerprint(tok):
    assert registry.resolve("tokenizer", "haar-4x8x8") is HaarTokenizer
    z = tok.encode(_random_video(0, frames=13, height=24, width=40))
    assert tuple(z.shape[1:]) == HaarTokenizer.latent_shape(13, 24, 40) == (16, 4, 3, 5)
    assert z.dtype == torch.float32
    fp = tok.fingerprint()
    assert fp["name"] == "haar-4x8x8" and fp["version"] == 2 and fp["latent_channels"] == 16
    with pytest.raises(ConfigError, match="num_frames=10"):
        tok.encode(_random_video(0, frames=10))
    with pytest.raises(ConfigError, match="no weights"):
        HaarTokenizer.from_config(TokenizerConfig(name="haar-4x8x8", checkpoint="w.pth"), "cpu")
    assert isinstance(HaarTokenizer.from_config(TokenizerConfig(name="haar-4x8x8"), "cpu"), HaarTokenizer)


def test_decode_encode_is_an_orthogonal_projection(tok):
    x, y = _random_video(1), _random_video(2)
    px, py = tok.decode(tok.encode(x)), tok.decode(tok.encode(y))
    assert px.shape == x.shape
    torch.testing.assert_close(tok.decode(tok.encode(px)), px, atol=1e-6, rtol=0)  # idempotent
    left, right = float((px.double() * y.double()).sum()), float((x.double() * py.double()).sum())
    assert left == pytest.approx(right, rel=1e-5)  # self-adjoint
    assert float((x - px).norm()) > 0.5 * float(x.norm())  # it does discard something: not the identity


def test_encode_inverts_decode_on_latents(tok):
    z = torch.randn(2, 16, 3, 2, 3, generator=torch.Generator().manual_seed(3))
    z[:, 12:15, 0] = 0  # latent frame 0 has no time band: its group holds one frame
    torch.testing.assert_close(tok.encode(tok.decode(z)), z, atol=1e-5, rtol=0)
    z[:, 12:15, 0] = 1.0
    assert float(tok.encode(tok.decode(z))[:, 12:15, 0].abs().max()) == 0.0


def test_causal_first_latent_frame(tok):
    x = _random_video(4)
    z = tok.encode(x)
    later = x.clone()
    later[:, :, 1:] = _random_video(5)[:, :, 1:]
    z_later = tok.encode(later)
    assert torch.equal(z_later[:, :, 0], z[:, :, 0])  # latent frame 0 sees pixel frame 0 only
    assert not torch.equal(z_later[:, :, 1:], z[:, :, 1:])
    first = x.clone()
    first[:, :, 0] = -first[:, :, 0]
    assert torch.equal(tok.encode(first)[:, :, 1:], z[:, :, 1:])


def test_low_pass_channels_are_colour_block_means(tok):
    video = _smooth_video()
    z = tok.encode(torch.from_numpy(video)).numpy()
    frame0 = block_reduce(video[0, :, :1], (1, 1, 8, 8), np.mean)
    rest = block_reduce(video[0, :, 1:], (1, 4, 8, 8), np.mean)
    np.testing.assert_allclose(z[0, :3, :1], frame0, atol=1e-6)
    np.testing.assert_allclose(z[0, :3, 1:], rest, atol=1e-6)


def _documented_patterns(frames):
    """The 16 patterns exactly as docs/tokenizers.md states them, one value at a time."""
    patterns = np.zeros((16, 3, frames, 8, 8))
    for c in range(3):
        for t in range(frames):
            for y in range(8):
                for x in range(8):
                    lr = 1 if x < 4 else -1
                    tb = 1 if y < 4 else -1
                    patterns[c, c, t, y, x] = 1
                    patterns[3 + c, c, t, y, x] = lr
                    patterns[6 + c, c, t, y, x] = tb
                    patterns[9 + c, c, t, y, x] = lr * tb
                    patterns[12 + c, c, t, y, x] = 0 if frames == 1 else (1 if t < frames // 2 else -1)
                    patterns[15, c, t, y, x] = (-1) ** (x + y) / np.sqrt(3)
    return patterns.reshape(16, -1)


def _numpy_projection(video):
    """Least-squares projection of each block on the documented patterns (no orthonormality assumed)."""
    out = np.empty_like(video, dtype=np.float64)
    _, _, frames, height, width = video.shape
    groups = [(0, 1)] + [(s, 4) for s in range(1, frames, 4)]
    for start, g in groups:
        basis = _documented_patterns(g)  # [16, 3*g*64]
        projector = np.linalg.pinv(basis) @ basis  # symmetric projector onto the row span
        for i in range(0, height, 8):
            for j in range(0, width, 8):
                block = video[0, :, start:start + g, i:i + 8, j:j + 8].astype(np.float64)
                out[0, :, start:start + g, i:i + 8, j:j + 8] = (projector @ block.reshape(-1)).reshape(block.shape)
    return out


def test_psnr_matches_an_independent_projection(tok):
    video = _smooth_video()
    ours = tok.decode(tok.encode(torch.from_numpy(video))).numpy()
    reference = _numpy_projection(video)
    np.testing.assert_allclose(ours, reference, atol=2e-6)
    psnr_ours = peak_signal_noise_ratio(video.astype(np.float64), ours.astype(np.float64), data_range=2.0)
    psnr_reference = peak_signal_noise_ratio(video.astype(np.float64), reference, data_range=2.0)
    assert psnr_ours == pytest.approx(psnr_reference, abs=1e-3)
    assert psnr_ours > 20.0  # smooth content lives mostly in the low and half-block bands
