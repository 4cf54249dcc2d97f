"""Every test under tests/gpu is marked `gpu` and needs a CUDA device: where torch sees none they are collected
and skipped (nothing heavy runs at import or collection). docs/gpu-tests.md says how to run them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
NO_CUDA = "needs a CUDA device (torch.cuda.is_available() is False here)"


@pytest.hookimpl(tryfirst=True)  # before `-m gpu` selects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cuda = torch.cuda.is_available()
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.gpu)
            if not cuda:
                item.add_marker(pytest.mark.skip(reason=NO_CUDA))
