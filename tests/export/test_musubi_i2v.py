"""`export --to musubi` of samples carrying image-to-video conditioning, against the file format musubi-tuner
30c658c4f4b0bf05038b3346eff9670259b10fc7 writes and loads (dataset/cache_io.py save_latent_cache_wan,
wan_cache_latents.py encode_and_save_batch, dataset/bucket.py BucketBatchManager): bench/tools/musubi_i2v_check.py loads
such an export with musubi's own dataset code and compares it with musubi's own writer (docs/export.md has the
run); this file checks the same facts without musubi-tuner, which is not on PyPI. Files are read back with
safetensors."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from helpers.fake_rows import WAN21_TOKENIZER, build_cache, make_samples
from latentforge.cli.main import main
from latentforge.errors import ConfigError
from latentforge.export import export_cache, run
from latentforge.export.musubi_i2v import CLIP_KEY, Y_KEY, musubi_i2v_tensors
from latentforge.export.targets import musubi_files
from latentforge.export.write import write_verified
from latentforge.pipeline.conditioning import wan_i2v_mask

GRID = (3, 6, 8)  # latent frames, height, width of 9 frames at 64x48


def _sample(seed: int = 0, latent_channels: int = 16, dtype: torch.dtype = torch.float16) -> dict:
    generator = torch.Generator().manual_seed(seed)
    latent = torch.randn(latent_channels, *GRID, generator=generator).to(dtype)
    mask = wan_i2v_mask(1, *GRID, torch.device("cpu"))[0]
    y = torch.cat([mask, torch.randn(16, *GRID, generator=generator)]).to(dtype)
    return {"latent": latent, Y_KEY: y, CLIP_KEY: torch.randn(257, 1280, generator=generator).half(),
            "text_embeddings": torch.randn(16, 4096, generator=generator).half(), "text_length": torch.tensor(5),
            "prompt": "a prompt", "sample_id": "clips/vid_007"}


def _musubi_mask(pixel_frames: int) -> torch.Tensor:
    """musubi's (and Wan's) mask per latent frame and channel, [4, F']: one value per pixel frame (1 for frame 0,
    0 after), the first repeated four times, read in groups of four consecutive values per latent frame."""
    per_frame = [1.0] * 4 + [0.0] * (pixel_frames - 1)
    return torch.tensor(per_frame).view(-1, 4).T


@pytest.mark.parametrize("pixel_frames", [1, 9, 17, 81])
def test_the_mask_is_wans_first_frame_mask(pixel_frames):
    latent_frames = (pixel_frames - 1) // 4 + 1
    mask = wan_i2v_mask(1, latent_frames, 2, 3, torch.device("cpu"))[0]
    assert mask.shape == (4, latent_frames, 2, 3) and mask.dtype == torch.float32
    assert torch.equal(mask, _musubi_mask(pixel_frames)[:, :, None, None].expand(-1, -1, 2, 3))


def test_the_tensors_carry_musubis_names_and_the_samples_values_unchanged():
    sample = _sample()
    tensors = musubi_i2v_tensors("000000007", sample, sample["latent"])
    assert list(tensors) == ["clip_float16", "latents_image_3x6x8_float16"]  # save_latent_cache_wan's order
    assert tensors["latents_image_3x6x8_float16"] is sample[Y_KEY]  # the 20-channel y as the DiT takes it
    assert tensors["clip_float16"] is sample[CLIP_KEY]


def test_names_carry_the_latents_dtype_as_musubi_names_them():
    """musubi names clip_{dtype} after the latent's dtype: a float16 CLIP beside a bfloat16 latent is clip_bfloat16."""
    sample = _sample(dtype=torch.bfloat16)
    tensors = musubi_i2v_tensors("000000007", sample, sample["latent"])
    assert sorted(tensors) == ["clip_bfloat16", "latents_image_3x6x8_bfloat16"]
    assert tensors["clip_bfloat16"].dtype == torch.float16


def test_a_sample_without_conditioning_gets_no_extra_tensors():
    sample = {key: value for key, value in _sample().items() if key not in (CLIP_KEY, Y_KEY)}
    assert musubi_i2v_tensors("000000007", sample, sample["latent"]) == {}
    only_y = {key: value for key, value in _sample().items() if key != CLIP_KEY}  # a Wan2.2 I2V-A14B cache
    assert list(musubi_i2v_tensors("000000007", only_y, only_y["latent"], "i2v-A14B")) == [
        "latents_image_3x6x8_float16"]


def test_the_latent_file_holds_latents_clip_and_y_with_t2v_metadata(tmp_path):
    from types import SimpleNamespace

    sample = _sample()
    config = SimpleNamespace(num_frames=9, width=64, height=48)
    files = musubi_files(config, 7, sample, float("nan"), "i2v-14B")
    for file in files:
        write_verified(tmp_path, file)
    path = tmp_path / "000000007_00000-009_0064x0048_wan.safetensors"
    loaded = load_file(path)
    assert sorted(loaded) == ["clip_float16", "latents_3x6x8_float16", "latents_image_3x6x8_float16"]
    assert loaded["latents_image_3x6x8_float16"].shape == (20, *GRID)
    assert loaded["clip_float16"].shape == (257, 1280)
    for key, value in (("latents_3x6x8_float16", sample["latent"]), ("latents_image_3x6x8_float16", sample[Y_KEY]),
                       ("clip_float16", sample[CLIP_KEY])):
        assert loaded[key].dtype == value.dtype and torch.equal(loaded[key], value)
    with safe_open(str(path), framework="pt") as handle:  # save_latent_cache_common: the same keys as for T2V
        assert handle.metadata() == {"architecture": "wan", "width": "64", "height": "48",
                                     "format_version": "1.0.1", "frame_count": "9"}
    assert list(load_file(tmp_path / "000000007_wan_te.safetensors")) == ["varlen_t5_float16"]


@pytest.mark.parametrize(("task", "drop", "fix"), [
    ("i2v-14B", CLIP_KEY, "conditioning.image_embeds=clip-vit-h14"),
    ("i2v-14B", Y_KEY, "conditioning.image_latent=wan-i2v"),
    ("i2v-A14B", Y_KEY, "conditioning.image_latent=wan-i2v"),
])
def test_a_task_refuses_a_sample_without_its_streams_naming_sample_stream_and_fix(task, drop, fix):
    sample = {key: value for key, value in _sample().items() if key != drop}
    with pytest.raises(ConfigError) as refused:
        musubi_i2v_tensors("000000007 (clips/vid_007)", sample, sample["latent"], task)
    message = str(refused.value)
    assert "\n" not in message and "000000007 (clips/vid_007)" in message and drop in message
    assert task in message and fix in message


def test_a_y_that_does_not_fit_the_exported_latent_is_refused():
    stacked = _sample(latent_channels=48)  # rgb, depth and flow stacked: no Wan DiT pairs y with that
    with pytest.raises(ConfigError, match=r"sample s: image_cond_latent is \[20, 3, 6, 8\].*\[52, 3, 6, 8\].*"
                                          r"--modality rgb"):
        musubi_i2v_tensors("s", stacked, stacked["latent"])
    sample = _sample()
    with pytest.raises(ConfigError, match=r"\[20, 3, 6, 8\].*\[20, 2, 6, 8\]"):
        musubi_i2v_tensors("s", sample, sample["latent"][:, :2])


def test_a_y_without_wans_mask_is_refused():
    sample = _sample()
    sample[Y_KEY] = torch.cat([sample[Y_KEY][4:], sample[Y_KEY][:4]])  # mask after the latent, not before
    with pytest.raises(ConfigError, match="sample s: the first 4 channels of image_cond_latent are not Wan's "
                                          "first-frame mask.*conditioning.image_latent=wan-i2v"):
        musubi_i2v_tensors("s", sample, sample["latent"])


def test_clip_tokens_no_wan_dit_takes_are_refused():
    sample = _sample()
    sample[CLIP_KEY] = torch.zeros(257, 1024, dtype=torch.float16)
    with pytest.raises(ConfigError, match=r"clip_image_embeds is \[257, 1024\].*\[tokens, 1280\]"):
        musubi_i2v_tensors("s", sample, sample["latent"])


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("i2v") / "cache"
    build_cache(root, make_samples(text_dim=4096), tokenizer=WAN21_TOKENIZER)
    return root


def _with_conditioning(monkeypatch, keys: tuple[str, ...]) -> None:
    """The cache's rows as the conditioning readers will return them: `keys` added to each sample dict."""
    real = run.LatentCacheDataset.__getitems__

    def getitems(self, indices):
        items = real(self, indices)
        for item in items:
            extra = _sample(seed=item["dataset_index"])
            item.update({key: extra[key] for key in keys})
        return items

    monkeypatch.setattr(run.LatentCacheDataset, "__getitems__", getitems)


def test_export_cache_writes_the_conditioning_the_rows_carry(cache, tmp_path, monkeypatch):
    _with_conditioning(monkeypatch, (CLIP_KEY, Y_KEY))
    report = export_cache(cache, "musubi", tmp_path / "m", ["rgb"], musubi_task="i2v-14B")
    assert report.written == 2 * report.samples
    latent_files = sorted((tmp_path / "m").glob("*_wan.safetensors"))
    assert len(latent_files) == report.samples
    for index, path in enumerate(latent_files):
        loaded, extra = load_file(path), _sample(seed=index)
        assert torch.equal(loaded["latents_image_3x6x8_float16"], extra[Y_KEY])
        assert torch.equal(loaded["clip_float16"], extra[CLIP_KEY])


def test_a_task_the_cache_cannot_train_is_refused_before_the_folder_exists(cache, tmp_path, monkeypatch, cli):
    _with_conditioning(monkeypatch, (Y_KEY,))  # a Wan2.2 I2V-A14B cache: no CLIP tokens
    out = tmp_path / "m"
    refused = cli(["export", str(cache), "--to", "musubi", str(out), "--modality", "rgb", "--musubi-task", "i2v-14B"])
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "sample 000000000 (clips/vid_000) has no clip_image_embeds" in refused.stderr
    assert "conditioning.image_embeds=clip-vit-h14" in refused.stderr and not out.exists()
    assert main(["export", str(cache), "--to", "musubi", str(out), "--modality", "rgb",
                 "--musubi-task", "i2v-A14B"]) == 0
    written = [sorted(load_file(path)) for path in out.glob("*_wan.safetensors")]
    assert written and all(keys == ["latents_3x6x8_float16", "latents_image_3x6x8_float16"] for keys in written)


def test_a_task_for_another_target_or_an_unknown_task_is_refused(cache, tmp_path):
    with pytest.raises(ConfigError, match="the pt-dicts target takes none"):
        export_cache(cache, "pt-dicts", tmp_path / "p", musubi_task="i2v-14B")
    with pytest.raises(ConfigError, match="'flf2v-14B' is not an image-to-video task.*i2v-14B, i2v-A14B"):
        export_cache(cache, "musubi", tmp_path / "m", ["rgb"], musubi_task="flf2v-14B")
    assert not (tmp_path / "p").exists() and not (tmp_path / "m").exists()


def test_conditioning_that_does_not_fit_the_export_is_refused_before_the_folder_exists(cache, tmp_path, monkeypatch):
    _with_conditioning(monkeypatch, (CLIP_KEY, Y_KEY))
    with pytest.raises(ConfigError, match=r"sample 000000000 \(clips/vid_000\): image_cond_latent.*--modality rgb"):
        export_cache(cache, "musubi", tmp_path / "m")  # every modality stacked: 48 channels, not Wan's 16
    assert not (tmp_path / "m").exists()
