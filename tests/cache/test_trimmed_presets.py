"""Every preset but the perception layout stores text trimmed, and every reader of a cache gives the same items from
a trimmed cache as from a padded one of the same build: the Datasets (plain and bucketed), the Cosmos adapter, the
exports, verify (plain and deep), stats, inspect, preview, publish and fetch, a resumed build and an --extend.
The caches are built with the cosmos-predict2-480p preset's own settings at a tiny size (haar tokenizer, a tiny T5
of the width Cosmos reads, 1024); the padded one differs only by text.storage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from helpers.bucket_world import bucket_config
from helpers.builds import build_stopped_in_commit, tiny_extra, tiny_t5, tiny_world, write_table
from latentforge import LatentCacheDataset, load_config
from latentforge.builder.run import build
from latentforge.config.presets import PRESETS
from latentforge.config.schema import TextConfig
from latentforge.dataset.cosmos_adapter import CosmosVideo2WorldDataset
from latentforge.export.run import export_cache
from latentforge.sinks.hdf5.bucketed_dataset import BucketedLatentDataset
from latentforge.tokenizers.haar import HaarTokenizer

PRESET = "cosmos-predict2-480p"


def _config(world: dict, root: Path, rows: str = "all", *overrides: str):
    extra = tiny_extra(world[rows], root, world["t5"], ("rgb",))
    return load_config(preset=PRESET, extra=extra, overrides=list(overrides))


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("trimmed-presets")
    rows = tiny_world(folder / "world")
    world = {"folder": folder, "all": write_table(rows, folder / "world" / "all.csv"),
             "first": write_table(rows[:2], folder / "world" / "first.csv"), "t5": tiny_t5(folder / "t5", rows)}
    for name, overrides in (("trimmed", ()), ("padded", ("text.storage=padded",))):
        config = _config(world, folder / name, "all", *overrides)
        build(config, overwrite=True, quiet=True)
        world[name] = folder / name
    return world


def _equal(left, right) -> bool:
    return torch.equal(left, right) if isinstance(left, torch.Tensor) else left == right


def _same_items(a, b) -> None:
    assert len(a) == len(b) > 0
    for i in range(len(a)):
        left, right = a[i], b[i]
        assert left.keys() == right.keys()
        assert all(_equal(value, right[key]) for key, value in left.items()), i


def test_every_preset_but_the_perception_layout_stores_trimmed_text():
    storage = {name: preset["text"].get("storage", TextConfig().storage) for name, preset in PRESETS.items()
               if preset["text"].get("name") != "none"}  # a preset that stores no text has no text storage
    assert storage.pop("openvid-perception-stage1") == "padded"
    assert set(storage.values()) == {"trimmed"}


def test_the_datasets_and_the_cosmos_adapter_read_the_same_items(world):
    recorded = json.loads((world["trimmed"] / "cache_config.json").read_text())
    assert recorded["text"]["storage"] == "trimmed"
    _same_items(LatentCacheDataset(world["trimmed"]), LatentCacheDataset(world["padded"]))
    _same_items(CosmosVideo2WorldDataset(world["trimmed"]), CosmosVideo2WorldDataset(world["padded"]))


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    return load_file(path) if path.suffix == ".safetensors" else torch.load(path, weights_only=True)


@pytest.mark.filterwarnings("ignore::latentforge.errors.ForcedWarning")  # musubi: a T5 text cache, forced
@pytest.mark.parametrize("target", ["musubi", "pt-dicts"])
def test_exports_write_the_same_tensors(world, tmp_path, target, monkeypatch):
    # the haar rows stand in for Wan2.1 latents, which the musubi target takes (the text storage is what differs)
    monkeypatch.setattr(HaarTokenizer, "latent_family", "wan2.1")
    outputs = {}
    for name in ("trimmed", "padded"):
        export_cache(world[name], target, tmp_path / name, force=True)
        outputs[name] = {p.relative_to(tmp_path / name).as_posix(): _tensors(p)
                         for p in sorted((tmp_path / name).rglob("*")) if p.suffix in (".safetensors", ".pt")}
    assert outputs["trimmed"].keys() == outputs["padded"].keys() and outputs["trimmed"]
    for file, tensors in outputs["trimmed"].items():
        assert tensors.keys() == outputs["padded"][file].keys()
        assert all(_equal(tensors[key], outputs["padded"][file][key]) for key in tensors), file


def test_verify_stats_inspect_and_preview_read_a_trimmed_cache(world, cli, tmp_path):
    root = str(world["trimmed"])
    for args in (["verify", root], ["verify", root, "--deep", "--spot", "2", "--device", "cpu"], ["stats", root],
                 ["inspect", root], ["preview", root, "--samples", "1", "--out", str(tmp_path), "--device", "cpu"]):
        done = cli(args)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    assert "bit for bit" in cli(["verify", root, "--deep", "--spot", "1", "--device", "cpu"]).stdout


def test_publish_and_fetch_carry_a_trimmed_cache(world, cli, tmp_path):
    assert cli(["publish", str(world["trimmed"]), f"file://{tmp_path / 'remote'}"]).returncode == 0
    done = cli(["fetch", f"file://{tmp_path / 'remote'}", str(tmp_path / "fetched")])
    assert done.returncode == 0, done.stderr
    _same_items(LatentCacheDataset(tmp_path / "fetched"), LatentCacheDataset(world["padded"]))


def test_a_resumed_and_an_extended_trimmed_cache_read_as_the_padded_build(world, tmp_path):
    resumed = _config(world, tmp_path / "resumed")
    build_stopped_in_commit(resumed)
    build(resumed, quiet=True)
    _same_items(LatentCacheDataset(tmp_path / "resumed"), LatentCacheDataset(world["padded"]))
    build(_config(world, tmp_path / "extended", "first"), quiet=True)
    build(_config(world, tmp_path / "extended"), quiet=True, extend=True)
    extended, padded = LatentCacheDataset(tmp_path / "extended"), LatentCacheDataset(world["padded"])
    by_id = {padded[i]["sample_id"]: padded[i] for i in range(len(padded))}
    assert len(extended) == len(padded)
    for i in range(len(extended)):
        item = extended[i]
        assert torch.equal(item["text_embeddings"], by_id[item["sample_id"]]["text_embeddings"])


def test_a_bucketed_trimmed_cache_reads_as_the_padded_one(bucket_inputs, tmp_path):
    for name in ("trimmed", "padded"):
        build(bucket_config(*bucket_inputs, tmp_path / name, (f"text.storage={name}",)), overwrite=True, quiet=True)
    _same_items(BucketedLatentDataset(tmp_path / "trimmed"), BucketedLatentDataset(tmp_path / "padded"))
