"""Every test under tests/gpu is marked `gpu` and needs a CUDA device: where torch sees none they are collected
and skipped (nothing heavy runs at import or collection). Tests that also need the cuDNN frontend skip, saying
why, where it does not import. docs/gpu-tests.md says how to run them."""

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


@pytest.fixture(scope="session")
def cudnn_frontend() -> None:
    """Skip where the cuDNN frontend that runs recorded plans does not import (absent, or built for another CUDA)."""
    try:
        import cudnn  # noqa: F401
    except Exception as error:  # noqa: BLE001 - any failure to import it means no recorded plans here
        pytest.skip(f"recorded cuDNN plans need the cuDNN frontend (nvidia-cudnn-frontend), which does not import "
                    f"here: {type(error).__name__}: {error}")
