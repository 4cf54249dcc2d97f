"""The device backend's sampling tables reproduce torch's interpolate (bilinear, bicubic, with and without
antialias, down and up, odd sizes, a crop) and swscale's chroma positions, as gathers with fixed weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from latentforge.decode.resample_taps import chroma_taps, resize_taps


def gather_sum(values: torch.Tensor, index: np.ndarray, weight: np.ndarray) -> torch.Tensor:
    """Along the last axis, in float64: the reference sum of the table."""
    return (values[..., torch.from_numpy(index)] * torch.from_numpy(weight)).sum(-1)


@pytest.mark.parametrize("filter_name", ["bilinear", "bicubic"])
@pytest.mark.parametrize(("size_in", "size_out"), [(1280, 853), (720, 480), (97, 31), (64, 64), (48, 111), (5, 3)])
def test_resize_taps_give_torchs_interpolate(filter_name, size_in, size_out):
    values = torch.rand(3, size_in, dtype=torch.float64) * 255
    for antialias in (True, False):
        if antialias and size_out > size_in:
            continue  # interpolate antialiases only when an axis shrinks (torch_resize)
        image = values[:, None, None, :].expand(3, 1, 4, size_in)
        reference = F.interpolate(image, size=(4, size_out), mode=filter_name, align_corners=False,
                                  antialias=antialias)[:, 0, 0]
        index, weight = resize_taps(size_in, size_out, filter_name, antialias, 0, size_out)
        assert index.shape[1] in (4, 8, 16, 32) and index.min() >= 0 and index.max() < size_in
        ours = gather_sum(values, index, weight)
        assert torch.allclose(ours, reference, atol=1e-9), (antialias, (ours - reference).abs().max())


def test_resize_taps_of_a_crop_are_its_columns():
    index, weight = resize_taps(1280, 853, "bicubic", True, 0, 853)
    cropped = resize_taps(1280, 853, "bicubic", True, 10, 842)
    assert np.array_equal(cropped[0], index[10:842]) and np.array_equal(cropped[1], weight[10:842])


def test_chroma_taps_sit_where_swscale_puts_the_chroma():
    """Columns: chroma sample k on luma column 2k (an even column is the sample itself, an odd one the symmetric
    midpoint filter). Rows: chroma between luma rows 2k and 2k + 1, so the two rows' filters mirror each other."""
    index, weight = chroma_taps(16, between_rows=False)
    assert np.allclose(weight.sum(1), 1)
    assert np.array_equal(index[6], [2, 3, 4, 5]) and np.allclose(weight[6], [0, 1, 0, 0])
    assert np.array_equal(index[7], [2, 3, 4, 5]) and np.allclose(weight[7], weight[7][::-1])
    index, weight = chroma_taps(16, between_rows=True)
    assert np.allclose(weight.sum(1), 1)
    assert np.array_equal(index[6], [1, 2, 3, 4]) and np.array_equal(index[7], [2, 3, 4, 5])
    assert np.allclose(weight[6], weight[7][::-1])
    assert np.array_equal(index[0], [0, 0, 0, 1]) and np.array_equal(index[15], [6, 7, 7, 7])  # edges repeat
