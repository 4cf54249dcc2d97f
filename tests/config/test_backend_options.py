"""A backend's own config keys: parsed into the dataclass its class declares, reached with the same `--set
section.key=value` as before, listed among its section's keys by to_dict, forgotten when a later layer names
another backend, and, when they belong to another backend, dropped at that backend's default (what run records of
earlier versions hold) or refused naming it."""

from __future__ import annotations

import dataclasses

import pytest

from helpers.builds import tiny_extra
from latentforge.config.loading import load_config
from latentforge.config.schema import NoOptions
from latentforge.errors import ConfigError
from latentforge.executor.ray.executor import RayOptions
from latentforge.readers.table import TableOptions
from latentforge.sinks.webdataset.sink import WebDatasetSinkOptions
from latentforge.tokenizers.wan.common import WanOptions


@pytest.fixture
def extra(tmp_path):
    table = tmp_path / "samples.csv"
    table.write_text("id,video,caption,mask,depth\n", encoding="utf-8")
    return tiny_extra(table, tmp_path / "cache")


def test_the_named_backends_keys_parse_into_its_options(extra):
    wan = {**extra, "tokenizer": {"name": "wan2.1", "checkpoint": "vae.pth", "precision": "bf16"}}
    config = load_config(extra=wan, overrides=["tokenizer.max_gpu_mem_gib=8", "tokenizer.conv_kernels=heuristics",
                                               "output.sink=webdataset", "output.shard_bytes=1024",
                                               "run.executor=ray", "run.max_unit_tries=5"])
    assert config.tokenizer.options == WanOptions(max_gpu_mem_gib=8.0, conv_kernels="heuristics")
    assert config.output.options == WebDatasetSinkOptions(shard_bytes=1024)
    assert config.run.options == RayOptions(max_unit_tries=5)
    carried = load_config(extra=wan, overrides=["tokenizer.conv_plans_file=/plans/cache_config.json"])
    assert carried.tokenizer.options == WanOptions(conv_plans_file="/plans/cache_config.json")
    with pytest.raises(ConfigError, match="tokenizer.max_gpu_mem_gib: expected a number, got 'lots'"):
        load_config(extra=wan, overrides=["tokenizer.max_gpu_mem_gib=lots"])


def test_to_dict_lists_them_in_their_section_and_loads_back_to_the_same_config(extra):
    wan = {**extra, "tokenizer": {"name": "wan2.1", "checkpoint": "vae.pth", "precision": "bf16"}}
    config = load_config(extra=wan, overrides=["tokenizer.temporal_window=8"])
    data = config.to_dict()
    assert data["tokenizer"] == {"name": "wan2.1", "checkpoint": "vae.pth", "sha256": None, "precision": "bf16",
                                 **dataclasses.asdict(WanOptions(temporal_window=8))}
    assert "options" not in data["output"] and "options" not in data["run"]
    assert load_config(extra=data) == config


def test_a_preset_s_backend_keys_do_not_follow_a_later_layer_to_another_backend(extra):
    # the perception preset sets tokenizer.temporal_window=16 for wan2.1; the layers above it name haar
    haar = load_config(preset="openvid-perception-stage1", extra=extra)
    assert haar.tokenizer.name == "haar-4x8x8" and haar.tokenizer.options == NoOptions()
    same = load_config(preset="openvid-perception-stage1", extra={**extra, "tokenizer": {"checkpoint": "vae.pth"}},
                       overrides=["tokenizer.name=wan2.1"])
    assert same.tokenizer.options.temporal_window == 16  # naming the preset's own backend again keeps its keys


def test_another_backends_keys_at_their_defaults_are_what_old_run_records_hold(extra):
    recorded = {**extra,
                "tokenizer": {"name": "haar-4x8x8", **dataclasses.asdict(WanOptions())},
                "output": {**extra["output"], "shard_bytes": WebDatasetSinkOptions().shard_bytes},
                "run": {**extra.get("run", {}), "ray_address": "", "max_unit_tries": 3}}
    config = load_config(extra=recorded)
    assert (config.tokenizer.options, config.output.options, config.run.options) == (NoOptions(),) * 3
    with pytest.raises(ConfigError, match="run.ray_address is a setting of executor ray, not of "
                                          "run.executor='local'"):
        load_config(extra=recorded, overrides=["run.ray_address=10.0.0.1:6379"])


def test_the_table_readers_columns_are_its_own_keys_whether_named_or_chosen_by_auto(extra, tmp_path):
    columns = {k: v for k, v in extra["dataset"].items() if k not in ("reader", "path")}
    config = load_config(extra=extra)
    assert config.dataset.options == TableOptions(**columns)
    assert config.to_dict()["dataset"] == {"reader": "table", "path": extra["dataset"]["path"],
                                           "on_missing_caption": "reject", "limit": None,
                                           **dataclasses.asdict(TableOptions(**columns))}
    auto = {**extra, "dataset": {k: v for k, v in extra["dataset"].items() if k != "reader"}}
    assert load_config(extra=auto).dataset == config.dataset  # auto picked table from the .csv, keys and all
    # a column set by a layer below the one that names the reader stays: auto named no reader to replace
    later = load_config(extra=auto, overrides=["dataset.reader=table", "dataset.caption_column=text"])
    assert later.dataset.options == TableOptions(**{**columns, "caption_column": "text"})


def test_set_flags_are_one_layer_so_their_order_does_not_matter(extra):
    wan = {**extra, "tokenizer": {"checkpoint": "vae.pth"}}
    for flags in (["tokenizer.temporal_window=8", "tokenizer.name=wan2.1"],
                  ["tokenizer.name=wan2.1", "tokenizer.temporal_window=8"]):
        assert load_config(extra=wan, overrides=flags).tokenizer.options == WanOptions(temporal_window=8)


def test_a_cosmos_folder_refuses_a_table_column_naming_the_reader_it_belongs_to(extra, tmp_path):
    folder = tmp_path / "cosmos"
    (folder / "videos").mkdir(parents=True)
    cosmos = {**extra, "dataset": {"path": [str(folder)]}, "modalities": {"names": ["rgb"]}}
    assert load_config(extra=cosmos).dataset.options == NoOptions()
    with pytest.raises(ConfigError, match=r"dataset.t5_pickle_column is a setting of reader table, not of "
                                          r"dataset.reader='cosmos_dir'; drop it, or set dataset.reader to table"):
        load_config(extra=cosmos, overrides=["dataset.t5_pickle_column=t5"])
    with pytest.raises(ConfigError, match=r"unknown key dataset.video_colum; allowed keys in dataset \(with "
                                          r"dataset.reader='table'\): reader, path, on_missing_caption, limit, "
                                          r"id_column, video_column"):
        load_config(extra=extra, overrides=["dataset.video_colum=v"])


def test_without_a_dataset_path_the_path_is_named_before_any_reader_key(extra):
    dataset = {k: v for k, v in extra["dataset"].items() if k not in ("reader", "path")}
    with pytest.raises(ConfigError, match=r"dataset.path is empty; give the dataset folder"):
        load_config(extra={**extra, "dataset": dataset})
