"""The dataset TOML docs/export.md gives for musubi-tuner, read the way bench/tools/musubi_check.py fills it in, against
musubi-tuner's own rules at the commit that script was run on (kohya-ss/musubi-tuner
30c658c4f4b0bf05038b3346eff9670259b10fc7, src/musubi_tuner/dataset/config_utils.py and image_video_dataset.py).

bench/tools/musubi_check.py loads an export through this block with musubi-tuner's code itself (docs/export.md has the
result); musubi-tuner is not on PyPI, so the suite checks the block against the facts that run relies on."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from helpers import REPO
from helpers.fake_rows import WAN21_TOKENIZER, build_cache, make_samples
from latentforge.export import export_cache

tomllib = pytest.importorskip("tomllib", reason="reading TOML needs Python 3.11's tomllib")

# ConfigSanitizer: DATASET_ASCENDABLE_SCHEMA (allowed in [general] and in each dataset) and
# VIDEO_DATASET_DISTINCT_SCHEMA (a dataset validated as video); voluptuous refuses any other key.
ASCENDABLE = {"caption_extension", "batch_size", "num_repeats", "resolution", "enable_bucket", "bucket_no_upscale"}
VIDEO_ONLY = {"video_directory", "video_jsonl_file", "control_directory", "target_frames", "frame_extraction",
              "frame_stride", "frame_sample", "max_frames", "cache_directory", "source_fps", "fp_latent_window_size"}
IMAGE_ONLY_KEYS = {"image_directory", "image_jsonl_file"}
# validate_flex_dataset: an entry is a video dataset only with one of these; else the image schema applies
MAKES_VIDEO = {"video_directory", "video_jsonl_file"}


def _bench():
    spec = importlib.util.spec_from_file_location("bench_musubi_check", REPO / "bench" / "tools" / "musubi_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("musubi_toml")
    build_cache(folder / "cache", make_samples(text_dim=4096), tokenizer=WAN21_TOKENIZER)
    export_cache(folder / "cache", "musubi", folder / "export", ["rgb"])
    return folder / "export"


def _check_against_musubi_schema(config: dict) -> None:
    assert set(config) <= {"general", "datasets"}
    assert set(config.get("general", {})) <= ASCENDABLE
    for entry in config["datasets"]:
        assert entry.keys() & MAKES_VIDEO, "without video_directory musubi-tuner validates the entry as images"
        assert set(entry) <= ASCENDABLE | VIDEO_ONLY and not entry.keys() & IMAGE_ONLY_KEYS
        assert all(isinstance(frames, int) for frames in entry["target_frames"])
        assert isinstance(entry["cache_directory"], str) and isinstance(entry["video_directory"], str)
    resolution = config["general"]["resolution"]
    assert isinstance(resolution, int) or (len(resolution) == 2 and all(isinstance(v, int) for v in resolution))


def test_the_documented_toml_is_a_video_dataset_musubi_accepts():
    _check_against_musubi_schema(tomllib.loads(_bench().documented_toml()))


def test_filled_in_for_an_export_it_points_musubi_at_the_export_files(export_dir, tmp_path):
    bench = _bench()
    config = tomllib.loads(bench.for_export(export_dir, tmp_path / "no_videos"))
    _check_against_musubi_schema(config)
    entry = config["datasets"][0]
    assert entry["cache_directory"] == str(export_dir) and entry["video_directory"] == str(tmp_path / "no_videos")
    assert config["general"]["resolution"] == [64, 48] and entry["target_frames"] == [9]
    # VideoDataset.prepare_for_training: latents globbed as *_{architecture}.safetensors, each one's text at
    # {item_key}_{architecture}_te.safetensors, item_key the name's tokens before the last three
    latents = sorted(Path(entry["cache_directory"]).glob("*_wan.safetensors"))
    assert len(latents) == 21
    for path in latents:
        item_key = "_".join(path.name.split("_")[:-3])
        assert (export_dir / f"{item_key}_wan_te.safetensors").is_file()


def test_without_video_directory_the_entry_would_be_read_as_images():
    """The failure the documented block avoids: what is left is checked against the image schema, which has no
    target_frames (musubi-tuner: `extra keys not allowed @ data['datasets'][0]['target_frames']`)."""
    bench = _bench()
    config = tomllib.loads(bench.filled_toml(bench.documented_toml(), {}, drop=("video_directory",)))
    entry = config["datasets"][0]
    assert not entry.keys() & MAKES_VIDEO and "target_frames" in entry
