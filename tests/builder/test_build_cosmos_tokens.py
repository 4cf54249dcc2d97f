"""A discrete-token cache: a tiny table dataset built through the CLI with cosmos-dv8x8x8 (our modules traced at
width 2 into a released-style hub folder, random weights). The shard holds uint16 token ids [N, M, T', H', W'],
equal to the tokenizer's encode_ids of the recorded frames; verify passes, a tampered id fails it (HDF5 and
WebDataset), and a deep verify re-encodes the ids exactly."""

from __future__ import annotations

import io
import json
import shutil
import tarfile

import h5py
import numpy as np
import pytest
import torch
import yaml
from torch.utils.data import DataLoader

from helpers.builds import read_manifest, tiny_extra, tiny_world, write_table
from latentforge import LatentCacheDataset, StreamingLatentDataset, verify
from latentforge.cache.expect import CacheMismatch
from latentforge.cache.rows import manifest_rows
from latentforge.cli.main import main
from latentforge.config import TokenizerConfig
from latentforge.dataset.collate import collate_latent_batch
from latentforge.demo.tiny_tokenizer import save_hub_folder, seeded_weights
from latentforge.errors import ConfigError
from latentforge.export.run import export_cache
from latentforge.registry import resolve
from latentforge.tokenizers.base import pixels_to_input
from latentforge.tokenizers.cosmos.architecture import released
from latentforge.tokenizers.cosmos.model import CosmosVideoAutoencoder
from latentforge.verification.deep import verify_deep
from latentforge.verification.quality import QualityThresholds
from latentforge.verification.reencode import Overrides, SampleFinder, recorded_config, recorded_pixels

NAME = "cosmos-dv8x8x8"
pytestmark = pytest.mark.slow  # tracing the tiny model and a build: ~20 s on a shared CPU before any test runs


def _build(tmp, checkpoint, table, root, *overrides: str) -> None:
    """`latentforge build --config FILE --out ROOT` of the tiny rgb build with the DV tokenizer."""
    extra = tiny_extra(table, root, modalities=("rgb",))
    del extra["output"]["root"]
    extra["frames"] = {"num_frames": 9, "height": 16, "width": 16}
    extra["tokenizer"] = {"name": NAME, "checkpoint": str(checkpoint), "precision": "fp32"}
    config_file = tmp / "build.yaml"
    config_file.write_text(yaml.safe_dump({"preset": "openvid-perception-stage1", **extra}), encoding="utf-8")
    sets = [a for o in overrides for a in ("--set", o)]
    assert main(["build", "--config", str(config_file), "--out", str(root), "--quiet", *sets]) == 0


def _dataset(root) -> str:
    return json.loads((root / "cache_config.json").read_text())["latent"]["dataset"]


@pytest.fixture(scope="module")
def dv_world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dv")
    model = seeded_weights(CosmosVideoAutoencoder(released("DV", 8, 8).narrowed(2, (2, 4, 4), 1, 16)).eval(), seed=12)
    checkpoint = save_hub_folder(tmp / "Cosmos-Tokenizer-DV8x8x8", model)
    table = write_table(tiny_world(tmp / "world", clips=3), tmp / "world" / "samples.csv")
    root = tmp / "cache"
    _build(tmp, checkpoint, table, root)
    return tmp, checkpoint, table, root


def test_token_ids_are_stored_as_uint16_and_equal_encode_ids(dv_world):
    _, checkpoint, _, root = dv_world
    config = json.loads((root / "cache_config.json").read_text())
    assert config["latent"]["tokens"] == {"dtype": "uint16", "vocabulary": 64000, "fsq_levels": [8, 8, 8, 5, 5, 5],
                                          "grid": [2, 2, 2], "sequence_length": 8}
    assert config["latent"]["shape"] == [1, 2, 2, 2] and config["storage_dtype"] == "float16"
    tokenizer = resolve("tokenizer", NAME).from_config(TokenizerConfig(name=NAME, checkpoint=str(checkpoint)), "cpu")
    build_config = recorded_config(root, Overrides())
    finder = SampleFinder(root, build_config, reread=False)
    rows = manifest_rows(root, lambda row: True)
    assert len(rows) == 2
    for row in rows:
        with h5py.File(root / row.shard_path, "r") as shard:
            assert shard[_dataset(root)].dtype == np.uint16
            stored = shard[_dataset(root)][row.cache_row]
        pixels, differences = recorded_pixels(row, finder.sample(row), build_config)
        assert differences == []
        expected = tokenizer.encode_ids(pixels_to_input(pixels.modalities["rgb"], "cpu")[None])
        assert stored.shape == (1, 2, 2, 2)
        assert np.array_equal(stored[0].astype(np.int64), expected[0].numpy())
    assert len(np.unique(stored)) > 1  # a live encoder, not one saturated code


def test_verify_passes_and_a_tampered_id_fails(dv_world, tmp_path):
    _, _, _, root = dv_world
    assert main(["verify", str(root)]) == 0
    tampered = shutil.copytree(root, tmp_path / "tampered")
    (row, *_) = read_manifest(tampered)
    with h5py.File(tampered / row["shard_path"], "r+") as shard:
        shard[_dataset(tampered)][row["cache_row"], 0, 1, 0, 1] = 64000
    report = verify(tampered)
    failed = {check.name: check.detail for check in report.failures}
    assert "token_ids" in failed and "64000" in failed["token_ids"] and "[0, 1, 0, 1]" in failed["token_ids"]


def test_deep_verify_re_encodes_every_id_exactly(dv_world):
    _, _, _, root = dv_world
    anything = QualityThresholds(-np.inf, -np.inf, -np.inf, -np.inf)  # random weights decode to noise
    report = verify_deep(root, spot=2, thresholds=anything)
    assert report.ok, report.failures
    assert report.comparison.startswith("exact (every token id equal)")
    assert report.exact_id_fraction == 1.0
    assert {check.name for check in report.checks} >= {"reencode", "latent_frame0", "quality"}
    assert len(report.quality) == 2 and all(np.isfinite(q.psnr_db) for q in report.quality)


@pytest.fixture(scope="module")
def dv_wds(dv_world, tmp_path_factory):
    """The same build into a WebDataset cache."""
    tmp, checkpoint, table, _ = dv_world
    wds = tmp_path_factory.mktemp("dv-wds") / "wds"
    _build(tmp, checkpoint, table, wds, "output.sink=webdataset")
    return wds


def test_the_streaming_dataset_returns_the_same_ids(dv_world, dv_wds):
    streamed = list(StreamingLatentDataset(f"file://{dv_wds}", flatten_tokens=True))
    local = LatentCacheDataset(dv_world[3], flatten_tokens=True)
    assert len(streamed) == len(local) == 2
    for item in streamed:
        expected = local[item["dataset_index"]]
        assert item["latent"].dtype == torch.int64 and torch.equal(item["latent"], expected["latent"])
        assert torch.equal(item["tokens"], expected["tokens"]) and int(item["token_length"]) == 8


def test_the_webdataset_sink_carries_the_ids(dv_world, dv_wds, tmp_path):
    root = dv_world[3]
    wds = shutil.copytree(dv_wds, tmp_path / "wds")  # tampered below
    assert verify(wds).ok
    (tar_path,) = sorted((wds / "shards").glob("*.tar"))
    with tarfile.open(tar_path) as tar:
        first = tar.extractfile(sorted(m.name for m in tar.getmembers() if m.name.endswith(".latent.npy"))[0])
        streamed = np.load(io.BytesIO(first.read()))
    (row, *_) = read_manifest(root)
    with h5py.File(root / row["shard_path"], "r") as shard:
        assert np.array_equal(streamed, shard[_dataset(root)][row["cache_row"]]) and streamed.dtype == np.uint16
    # a tampered id fails the WebDataset integrity check too
    members = {}
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            members[member.name] = tar.extractfile(member).read()
    name = sorted(n for n in members if n.endswith(".latent.npy"))[0]
    bad = streamed.copy()
    bad[0, 0, 0, 0] = 65535
    buffer = io.BytesIO()
    np.save(buffer, bad)
    members[name] = buffer.getvalue()
    with tarfile.open(tar_path, "w") as tar:
        for member_name, data in members.items():
            info = tarfile.TarInfo(member_name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    failed = {check.name: check.detail for check in verify(wds).failures}
    assert "token_ids" in failed and "65535" in failed["token_ids"]



@pytest.mark.parametrize("target", ["musubi", "pt-dicts"])
def test_export_refuses_token_ids(dv_world, tmp_path, target):
    _, _, _, root = dv_world
    with pytest.raises(ConfigError, match="holds token ids .*vocabulary 64000.*not latents"):
        export_cache(root, target, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_dataset_returns_int64_ids_and_their_raster_sequence(dv_world):
    _, _, _, root = dv_world
    plain = LatentCacheDataset(root)
    flat = LatentCacheDataset(root, flatten_tokens=True, expect={"tokenizer_family": NAME, "vocabulary": 64000,
                                                                 "token_grid": (2, 2, 2)})
    (row, *_) = read_manifest(root)
    with h5py.File(root / row["shard_path"], "r") as shard:
        stored = shard[_dataset(root)][row["cache_row"]]
    item = flat[row["dataset_index"]]
    assert item["latent"].dtype == torch.int64 and np.array_equal(item["latent"].numpy(), stored)
    assert item["tokens"].shape == (1, 8) and int(item["token_length"]) == 8
    t, h, w = 1, 0, 1  # raster order: position t*H'*W' + h*W' + w
    assert int(item["tokens"][0, t * 4 + h * 2 + w]) == int(stored[0, t, h, w])
    assert "tokens" not in plain[0] and plain[0]["latent"].dtype == torch.int64
    with pytest.raises(CacheMismatch, match="vocabulary: trainer expects 1024, cache has 64000"):
        LatentCacheDataset(root, expect={"vocabulary": 1024})
    batch = next(iter(DataLoader(flat, batch_size=2, collate_fn=collate_latent_batch)))
    assert batch["tokens"].shape == (2, 1, 8) and batch["tokens"].dtype == torch.int64
