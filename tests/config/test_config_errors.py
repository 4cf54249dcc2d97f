"""Config errors fail before any model is loaded, naming the allowed values, through load_config and through
the CLI with exit status 2 (issue 2, "Config errors")."""

from __future__ import annotations

import dataclasses

import pytest
import transformers
import yaml

from helpers.builds import tiny_extra
from latentforge import registry
from latentforge.cli.main import main
from latentforge.config import FramesConfig
from latentforge.config.loading import load_config
from latentforge.errors import ConfigError

# (overrides separated by spaces, phrases the message must hold: the offending value and what is allowed instead)
FRAMES_KEYS = [f.name for f in dataclasses.fields(FramesConfig)]
CASES = {
    "unknown key": ("frames.num_frame=9", ["unknown key frames.num_frame", "allowed keys in frames: "
                                           + ", ".join(FRAMES_KEYS)]),
    "num_frames": ("frames.num_frames=10", ["num_frames=10", "(num_frames - 1) % 4 == 0", "use 9 or 13"]),
    "height": ("frames.height=36", ["height=36", "not divisible by the spatial factor 8", "use 32 or 40"]),
    "width": ("frames.width=50", ["width=50", "not divisible by the spatial factor 8", "use 48 or 56"]),
    "mask without column": ("dataset.mask_column=null", ["modality 'mask' is configured but dataset.mask_column "
                                                         "is not set"]),
    "column without modality": ("modalities.names=[rgb,mask]", ["dataset.depth_column='depth' is set but 'depth' "
                                                                "is not in modalities.names"]),
    "reader without modality": ("dataset.reader=cosmos_dir", ["the cosmos_dir reader provides rgb only"]),
    "bad choice": ("frames.resize=crop", ["frames.resize='crop' is not allowed; allowed: cover_crop, stretch"]),
    "text storage": ("text.storage=packed", ["text.storage='packed' is not allowed; allowed: padded, trimmed"]),
    "text padding": ("text.padding=longest", ["text.padding='longest' is not allowed; allowed: none, max_length"]),
    "unknown tokens policy": ("text.on_unknown=drop", ["text.on_unknown='drop' is not allowed; allowed: warn, reject"]),
    "unknown tokens limit": ("text.max_unknown_fraction=1.5", ["text.max_unknown_fraction=1.5 must be within [0, 1]"]),
    "url root": ("output.root=gs://bucket/cache", ["output.root='gs://bucket/cache' is a URL",
                                                   "latentforge publish LOCAL_FOLDER gs://bucket/cache",
                                                   "output.sink=webdataset"]),
    "unknown sink": ("output.sink=zarr", ["output.sink='zarr'; allowed: hdf5, webdataset"]),
    "shard bytes": ("output.sink=webdataset output.shard_bytes=0", ["output.shard_bytes=0 must be >= 1"]),
    "another tokenizer's key": ("tokenizer.conv_kernels=heuristics", [
        "tokenizer.conv_kernels is a setting of tokenizer wan2.1, wan2.2, not of tokenizer.name='haar-4x8x8'",
        "set tokenizer.name to wan2.1 or wan2.2"]),
    "unknown tokenizer key": ("tokenizer.bogus=1", [
        "unknown key tokenizer.bogus", "allowed keys in tokenizer (with tokenizer.name='haar-4x8x8'): name, "
        "checkpoint, sha256, precision"]),
    "webdataset buckets": ("output.sink=webdataset frames.buckets=[[9,32,48],[9,40,48]]",
                           ["output.sink='webdataset' writes one cache, but frames.buckets gives several"]),
    "upscale without buckets": ("frames.bucket_upscale=true", ["frames.bucket_upscale=true lets a sample go to a "
                                                                "bucket larger", "frames.buckets is empty"]),
    "decode workers": ("run.workers_per_gpu=many", ["run.workers_per_gpu='many'; allowed: auto, or a whole number "
                                                    ">= 0"]),
    "decode threads": ("run.decode_threads=-1", ["run.decode_threads=-1 must be >= 0"]),
    "device resize filter": ("frames.resize_backend=device frames.resize_filter=lanczos",
                             ["frames.resize_filter='lanczos' is not available with resize_backend='device'",
                              "allowed: bilinear, bicubic, area", "frames.resize_backend=swscale"]),
    "resize backend": ("frames.resize_backend=gpu", ["frames.resize_backend='gpu' is not allowed; allowed: swscale, "
                                                     "torch, device"]),
    "url staging": ("output.sink=webdataset output.staging_dir=s3://b/x",
                    ["output.staging_dir='s3://b/x' is a URL; give a node-local folder"]),
    "dedup threshold": ("dedup.enabled=true dedup.model=clip dedup.threshold=1.5",
                        ["dedup.threshold=1.5 is outside (0, 1]", "cosine similarity"]),
    "dedup threshold while disabled": ("dedup.threshold=0", ["dedup.threshold=0.0 is outside (0, 1]"]),
    "dedup without model": ("dedup.enabled=true", ["dedup.enabled=true needs the CLIP image encoder: set "
                                                   "dedup.model"]),
    "dedup frames": ("dedup.frames=0", ["dedup.frames=0 must be >= 1"]),
}


@pytest.fixture
def no_models(monkeypatch, tmp_path):
    """Any model load fails loudly, and the text model folder does not exist: a config error must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the config was validated")

    # The configured tokenizer only: resolving wan2.1 would import diffusers, seconds of the test budget.
    monkeypatch.setattr(registry.resolve("tokenizer", "haar-4x8x8"), "from_config", classmethod(refuse))
    for name in registry.names("text"):
        monkeypatch.setattr(registry.resolve("text", name), "from_config", classmethod(refuse))
    monkeypatch.setattr(transformers.T5EncoderModel, "from_pretrained", refuse)
    monkeypatch.setenv("COLUMNS", "1000")  # rich wraps long messages at the terminal width
    table = tmp_path / "samples.csv"
    table.write_text("id,video,caption,mask,depth\n", encoding="utf-8")
    extra = tiny_extra(table, tmp_path / "cache", text_path=tmp_path / "no-such-model")
    config_file = tmp_path / "build.yaml"
    config_file.write_text(yaml.safe_dump({"preset": "openvid-perception-stage1", **extra}), encoding="utf-8")
    return extra, config_file


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("case", sorted(CASES))
def test_config_error_names_the_allowed_values_before_any_model_load(case, no_models, capsys, tmp_path):
    extra, config_file = no_models
    overrides, phrases = CASES[case][0].split(" "), CASES[case][1]
    with pytest.raises(ConfigError) as raised:
        load_config(preset="openvid-perception-stage1", extra=extra, overrides=overrides)
    for phrase in phrases:
        assert phrase in str(raised.value)

    assert main(["build", "--config", str(config_file), *(a for o in overrides for a in ("--set", o))]) == 2
    err = _flat(capsys.readouterr().err)
    assert "config error" in err
    for phrase in phrases:
        assert _flat(phrase) in err
    assert not (tmp_path / "cache").exists()  # nothing planned, nothing written


def test_the_good_config_passes_validation(no_models):
    extra, _ = no_models
    config = load_config(preset="openvid-perception-stage1", extra=extra)
    assert (config.frames.num_frames, config.frames.height, config.frames.width) == (9, 32, 48)


def test_cli_process_exits_2_with_the_config_error_not_a_model_error(tmp_path, cli):
    # A text model folder that does not exist: were it loaded before validation, the error would be about it.
    table = tmp_path / "samples.csv"
    table.write_text("id,video,caption,mask,depth\n", encoding="utf-8")
    done = cli(["build", "--preset", "openvid-perception-stage1", "--reader", "table", "--tokenizer", "haar-4x8x8",
                "--dataset", str(table), "--out", str(tmp_path / "cache"), "--text-path", str(tmp_path / "missing"),
                "--set", "dataset.mask_column=mask", "--set", "dataset.depth_column=depth",
                "--set", "frames.num_frames=92"])
    assert done.returncode == 2, done.stdout + done.stderr
    err = _flat(done.stderr)
    assert "num_frames=92" in err and "(num_frames - 1) % 4 == 0" in err and "use 89 or 93" in err
    assert "missing" not in err
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("url", ["s3://bucket/x", "file:///tmp/x"])
def test_an_object_store_url_as_out_is_refused_not_built_into_a_look_alike_folder(url, no_models, capsys, tmp_path,
                                                                                monkeypatch):
    _, config_file = no_models
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["build", "--config", str(config_file), "--out", url]) == 2
    err = _flat(capsys.readouterr().err)
    assert f"output.root='{url}' is a URL" in err and f"latentforge publish LOCAL_FOLDER {url}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no 's3:' or 'file:' folder appeared
