"""The Cosmos adapter against cosmos-predict2==1.0.9's own __getitem__, run from the wheel's source text.

The wheel is fetched with `pip download --no-deps` into ~/.cache/latentforge-test-refs. Its `Dataset.__getitem__`
body is lifted from the AST (not imported: the package pins an incompatible stack) and run on a T5 pickle in
Cosmos's format made from the same cache row; the adapter must give the same keys, dtypes, shapes and values,
with the uint8 `video` replaced by the latent.
"""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

from helpers.fake_cache import h5py_row, manifest_rows, write_fake_cache
from latentforge.dataset import LATENT_KEY, CacheMismatch, CosmosVideo2WorldDataset
from latentforge.dataset.cosmos_adapter import COSMOS_T5_DIM, COSMOS_T5_TOKENS

WHEEL = "cosmos_predict2-1.0.9-py3-none-any.whl"
REFS = Path.home() / ".cache" / "latentforge-test-refs"


def _wheel_file(name: str) -> str:
    wheel = REFS / WHEEL
    if not wheel.exists():
        REFS.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "cosmos-predict2==1.0.9", "-d", str(REFS)],
            capture_output=True, text=True, timeout=300,
        )
        if done.returncode != 0 or not wheel.exists():
            pytest.skip(f"cannot fetch the cosmos-predict2 wheel: {done.stderr[-300:]}")
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(name).decode("utf-8")


def _constants() -> dict[str, int]:
    tree = ast.parse(_wheel_file("cosmos_predict2/data/dataset_utils.py"))
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in ("_NUM_T5_TOKENS", "_T5_EMBED_DIM")
    }


def _reference_getitem():
    """Cosmos's `Dataset.__getitem__` try-body as a function (self, index) -> sample dict."""
    tree = ast.parse(_wheel_file("cosmos_predict2/data/dataset_video.py"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Dataset")
    method = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__getitem__")
    body = next(n for n in method.body if isinstance(n, ast.Try)).body
    function = ast.FunctionDef(
        name="reference_getitem", args=method.args, body=body, decorator_list=[], returns=None, type_params=[]
    )
    module = ast.fix_missing_locations(ast.Module(body=[function], type_ignores=[]))
    namespace = {"np": np, "torch": torch, "os": os, "pickle": pickle, **_constants()}
    exec(compile(module, "cosmos_predict2/data/dataset_video.py", "exec"), namespace)
    return namespace["reference_getitem"]


@pytest.fixture(scope="module")
def cosmos_root(tmp_path_factory) -> Path:
    return write_fake_cache(
        tmp_path_factory.mktemp("cosmos") / "root", num_samples=3, rows_per_shard=2, modalities=("rgb",),
        latent_dataset="video_latent_state", text_dim=1024, max_length=512,
    )


def test_constants_match_cosmos():
    assert _constants() == {"_NUM_T5_TOKENS": COSMOS_T5_TOKENS, "_T5_EMBED_DIM": COSMOS_T5_DIM}


def test_sample_dict_matches_cosmos_getitem(cosmos_root, tmp_path):
    reference = _reference_getitem()
    dataset = CosmosVideo2WorldDataset(cosmos_root)
    (tmp_path / "t5_xxl").mkdir()
    for row in manifest_rows(cosmos_root):
        stored = h5py_row(cosmos_root, row)
        length = int(stored["t5_text_length"])
        # Cosmos's get_t5_embeddings.py format: a list holding one float16 [n_tokens, 1024] array.
        with open(tmp_path / "t5_xxl" / "clip.pickle", "wb") as handle:
            pickle.dump([stored["t5_text_embeddings"][:length]], handle)
        frames = torch.zeros(9, 3, 32, 48, dtype=torch.uint8)  # [T, C, H, W] as _get_frames returns
        fake_self = types.SimpleNamespace(
            video_paths=[str(tmp_path / "videos" / "clip.mp4")], t5_dir=str(tmp_path / "t5_xxl"),
            sequence_length=9, _get_frames=lambda path: (frames, row["provenance"]["source_fps"]),
        )
        ref = reference(fake_self, 0)
        ours = dataset[row["dataset_index"]]
        assert set(ours) == set(ref) - {"video"} | {LATENT_KEY}
        for key, value in ref.items():
            if key == "video":
                continue
            assert type(ours[key]) is type(value), key
            if isinstance(value, torch.Tensor):
                assert (ours[key].dtype, ours[key].shape) == (value.dtype, value.shape), key
                assert torch.equal(ours[key], value), key
            elif isinstance(value, dict):
                assert set(ours[key]) == set(value)
            else:
                assert ours[key] == value, key
        np.testing.assert_array_equal(ours[LATENT_KEY].numpy(), stored["video_latent_state"])
    batch = default_collate([dataset[0], dataset[1]])  # what Cosmos's DataLoader does with the items
    assert batch[LATENT_KEY].shape == (2, 16, 3, 4, 6) and batch["t5_text_embeddings"].shape == (2, 512, 1024)


def test_a_non_t5_cache_is_refused(tmp_path):
    root = write_fake_cache(tmp_path / "c", num_samples=2, modalities=("rgb",), text_name="umt5", text_dim=64)
    with pytest.raises(CacheMismatch, match="text_encoder: trainer expects 't5', cache has 'umt5'"):
        CosmosVideo2WorldDataset(root)
