"""The Wan VAE mid-block attention kernel (tokenizers/wan/attention.py) on a GPU against a float64 reference.

q, k and v are the chunks of one [N, L, 3D] bf16 projection (strided rows, as the encoder makes them) at Wan2.1's
D=384 and Wan2.2's D=640, with L no multiple of the query or key blocks. The kernel must be at least about as
accurate as the SDPA call it replaces (relative L2 against softmax(q k^T / sqrt(D)) v computed in float64 on the
GPU: at most 1.5x SDPA's, and below 5e-3), give the same bits on a second run, and leave head dims without a
configuration to SDPA.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from latentforge.tokenizers.wan import attention as wan_attention
from latentforge.tokenizers.wan.attention import AttentionConfig, config_for, single_head_attention


@pytest.fixture(scope="module")
def device() -> torch.device:
    pytest.importorskip("triton", reason="Triton is not importable: the attention runs through SDPA")
    return torch.device("cuda", 0)


def strided_qkv(frames: int, length: int, head_dim: int, device: torch.device, seed: int = 0):
    generator = torch.Generator(device=device).manual_seed(seed)
    qkv = torch.randn(frames, length, 3 * head_dim, generator=generator, device=device).to(torch.bfloat16)
    return qkv.chunk(3, dim=-1)


def exact(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    logits = q.double() @ k.double().transpose(1, 2) / q.shape[-1] ** 0.5
    return torch.softmax(logits, dim=-1) @ v.double()


def relative_l2(got: torch.Tensor, reference: torch.Tensor) -> float:
    return ((got.double() - reference).norm() / reference.norm()).item()


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]


@pytest.mark.parametrize("length", [1000, 6240])
@pytest.mark.parametrize("head_dim", [384, 640])
def test_kernel_is_as_accurate_as_sdpa_and_deterministic(device, head_dim, length):
    q, k, v = strided_qkv(2, length, head_dim, device, seed=head_dim + length)
    assert q.stride(1) == 3 * head_dim and wan_attention.kernel_applies(q)
    got = single_head_attention(q, k, v)
    assert got.dtype == torch.bfloat16 and got.shape == q.shape
    reference = exact(q, k, v)
    ours, theirs = relative_l2(got, reference), relative_l2(sdpa(q, k, v), reference)
    assert ours <= 1.5 * theirs and ours < 5e-3, f"rel-L2 {ours:.3e} against SDPA's {theirs:.3e}"
    assert torch.equal(single_head_attention(q, k, v), got), "a second run gave other bits"


@pytest.mark.parametrize("config", [AttentionConfig(64, 16, 128, 8, 3), AttentionConfig(64, 32, 64, 4, 2, 3)],
                         ids=["one program per row block", "output split in three"])
def test_other_configurations_agree(device, config):
    """Configurations off the rule (smaller key blocks, a split output) are as accurate."""
    q, k, v = strided_qkv(2, 777, 384, device, seed=1)
    reference = exact(q, k, v)
    rule = relative_l2(wan_attention.attention(q, k, v, config_for(384)), reference)
    other = relative_l2(wan_attention.attention(q, k, v, config), reference)
    assert other <= 1.5 * rule and other < 5e-3


@pytest.mark.parametrize("head_dim", [96, 200, 704])
def test_head_dims_without_a_configuration_run_sdpa(device, head_dim):
    q, k, v = strided_qkv(2, 300, head_dim, device)
    assert not wan_attention.kernel_applies(q)
    assert torch.equal(single_head_attention(q, k, v), sdpa(q, k, v))


def test_contiguous_and_strided_inputs_give_the_same_bits(device):
    q, k, v = strided_qkv(2, 1000, 384, device, seed=3)
    assert torch.equal(single_head_attention(q, k, v),
                       single_head_attention(q.contiguous(), k.contiguous(), v.contiguous()))
