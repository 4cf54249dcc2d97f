"""tokenizers/wan/attention.py on the CPU: the SDPA fallback (what the encoder runs there, so CPU latents keep
their bits), the launch-configuration rule, and input validation. The Triton kernel itself is tested on a GPU
(tests/gpu/test_attention_kernel.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from latentforge.tokenizers.wan import attention as wan_attention
from latentforge.tokenizers.wan.attention import config_for, single_head_attention


def strided_qkv(frames: int, length: int, head_dim: int, dtype=torch.bfloat16, seed: int = 0):
    """q, k, v as the encoder makes them: the chunks of one [N, L, 3D] projection."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(frames, length, 3 * head_dim, generator=generator).to(dtype).chunk(3, dim=-1)


def test_cpu_runs_the_sdpa_call_the_encoder_made():
    q, k, v = strided_qkv(2, 50, 384)
    assert not q.is_contiguous()
    expected = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]
    got = single_head_attention(q, k, v)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 50, 384)
    assert torch.equal(got, expected)


def test_the_kernel_applies_only_on_cuda_to_multiples_of_64():
    q = torch.empty(1, 4, 384)
    assert not wan_attention.kernel_applies(q)  # a CPU tensor


@pytest.mark.parametrize("head_dim", [384, 640, 128, 64, 192])
def test_config_rule_is_fixed_and_tiles_the_head_dim(head_dim):
    config = config_for(head_dim)
    assert head_dim % (config.chunk * config.splits) == 0 and config.chunk in (64, 128)
    for size in (config.block_m, config.block_n, config.chunk):
        assert size & (size - 1) == 0  # Triton blocks are powers of two


def test_wan22_head_dim_splits_the_output_in_two():
    assert config_for(640).splits == 2 and config_for(384).splits == 1


@pytest.mark.parametrize("head_dim", [100, 704, 768])
def test_config_rule_refuses_head_dims_it_has_no_tiles_for(head_dim):
    with pytest.raises(ValueError, match="head dim"):
        config_for(head_dim)


@pytest.mark.parametrize("shapes", [((2, 5, 64), (2, 5, 64), (2, 6, 64)), ((5, 64), (5, 64), (5, 64))])
def test_mismatched_or_unbatched_inputs_are_refused(shapes):
    q, k, v = (torch.zeros(shape) for shape in shapes)
    with pytest.raises(ValueError, match=r"\[N, L, D\]"):
        single_head_attention(q, k, v)


def test_mixed_dtypes_are_refused():
    q, k, v = strided_qkv(1, 4, 64)
    with pytest.raises(ValueError, match="dtype"):
        single_head_attention(q, k.float(), v)
