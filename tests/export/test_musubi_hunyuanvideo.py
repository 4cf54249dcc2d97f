"""`export --to musubi-hunyuanvideo`, and every target refusing a cache of a latent family it does not write: files
read back with safetensors and compared with the shard rows as h5py reads them; names parsed the way musubi-tuner's
VideoDataset.prepare_for_training parses them; the unscaled latent multiplied back the way its HunyuanVideo
trainer scales it (hv_train_network.py scale_shift_latents: `latents * 0.476986`)."""

from __future__ import annotations

import json

import h5py
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from helpers.fake_rows import WAN21_TOKENIZER, build_cache, make_samples
from latentforge.errors import ConfigError
from latentforge.export import export_cache

MUSUBI_SCALING_FACTOR = 0.476986  # musubi-tuner's hunyuan_model/vae.py SCALING_FACTOR
HUNYUANVIDEO = {"name": "hunyuanvideo", "checkpoint_sha256": None, "precision": "fp32",
                "scaling_factor": MUSUBI_SCALING_FACTOR}


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """Generated rows recorded as encoded by each tokenizer; the HunyuanVideo one without text, as its preset."""
    folder = tmp_path_factory.mktemp("families")
    build_cache(folder / "hunyuanvideo", make_samples(), text=False, tokenizer=HUNYUANVIDEO)
    build_cache(folder / "wan2.1", make_samples(), tokenizer=WAN21_TOKENIZER)
    build_cache(folder / "haar", make_samples())
    return folder


def test_the_hunyuanvideo_files_hold_musubis_keys_names_and_the_unscaled_mean(caches, tmp_path):
    root, out = caches / "hunyuanvideo", tmp_path / "hv"
    report = export_cache(root, "musubi-hunyuanvideo", out, ["rgb"])
    manifest = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    files = sorted(out.glob("*_hv.safetensors"))  # musubi-tuner's glob for HunyuanVideo latent caches
    assert (report.samples, report.written, len(files)) == (len(manifest), len(manifest), len(manifest))
    assert not list(out.glob("*_te.safetensors"))  # no text: musubi-tuner's own text caching writes it
    for index, (path, row) in enumerate(zip(files, manifest)):
        tokens = path.name.split("_")  # as prepare_for_training splits them
        assert ("_".join(tokens[:-3]), tokens[-3], tokens[-2]) == (f"{index:09d}", "00000-009", "0064x0048")
        tensors = load_file(path)
        assert list(tensors) == ["latents_3x6x8_float32"]
        with h5py.File(root / row["shard_path"], "r") as shard:
            stored = torch.from_numpy(shard["perception_latent_state"][row["cache_row"]][:16])
        unscaled = tensors["latents_3x6x8_float32"]
        assert torch.equal(unscaled, stored.float() / MUSUBI_SCALING_FACTOR)
        assert torch.equal((unscaled * MUSUBI_SCALING_FACTOR).to(stored.dtype), stored)  # the trainer's latent back
        with safe_open(str(path), framework="pt") as handle:
            assert handle.metadata() == {"architecture": "hunyuan_video", "width": "64", "height": "48",
                                         "format_version": "1.0.1", "frame_count": "9"}


def test_stacked_modalities_are_refused_naming_the_fix_before_the_folder_exists(caches, tmp_path):
    with pytest.raises(ConfigError, match="48 channels, and HunyuanVideo's DiT takes 16; export one modality"):
        export_cache(caches / "hunyuanvideo", "musubi-hunyuanvideo", tmp_path / "hv")
    assert not (tmp_path / "hv").exists()


@pytest.mark.parametrize(("cache", "target", "named"), [
    ("hunyuanvideo", "musubi", r"hunyuanvideo tokenizer \(latent family hunyuanvideo\); the musubi target writes "
                               r"wan2.1 latents only. Targets that take this cache: musubi-hunyuanvideo, pt-dicts"),
    ("wan2.1", "musubi-hunyuanvideo", r"wan2.1 tokenizer \(latent family wan2.1\); the musubi-hunyuanvideo target "
                                      r"writes hunyuanvideo latents only. Targets that take this cache: musubi, "
                                      r"pt-dicts"),
    ("haar", "musubi", r"haar-4x8x8 tokenizer \(no trainer's latent family\).*Targets that take this cache: "
                       r"pt-dicts"),
])
def test_a_target_refuses_a_cache_of_another_family_before_the_folder_exists(caches, tmp_path, cache, target,
                                                                              named):
    with pytest.raises(ConfigError, match=named):
        export_cache(caches / cache, target, tmp_path / "out", ["rgb"])
    assert not (tmp_path / "out").exists()


def test_pt_dicts_take_any_family(caches, tmp_path):
    assert export_cache(caches / "haar", "pt-dicts", tmp_path / "pt").samples > 0


def test_latents_scaled_by_another_factor_are_refused(tmp_path):
    root = tmp_path / "cache"
    build_cache(root, make_samples(), text=False, tokenizer={**HUNYUANVIDEO, "scaling_factor": 0.5})
    with pytest.raises(ConfigError, match="scaled by 0.5 .* multiplies by 0.476986"):
        export_cache(root, "musubi-hunyuanvideo", tmp_path / "hv", ["rgb"])

