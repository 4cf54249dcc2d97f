"""tokenizer.tiling=spatial for the diffusers-class VAEs against diffusers' own tiled call: tiny random models of the
real architectures, clips larger than one tile, encoded bit for bit like `enable_tiling(...)` and the pipeline's
normalisation; the fingerprint records the rule; bad values are refused naming the key, the value and what is
allowed."""

from __future__ import annotations

import json

import diffusers
import pytest
import torch

from helpers.tiny_diffusers_vaes import TINY_VAES, reference_encode, save_tiny_vae
from latentforge import registry
from latentforge.config import TokenizerConfig
from latentforge.config.presets import PRESETS
from latentforge.errors import ConfigError
from latentforge.tokenizers.diffusers_vae import DiffusersVaeOptions

# name -> (clip T, H, W larger than a tile, tile_size, tile_stride): two or three tiles each way, overlapping
TILED = {
    "hunyuanvideo": ((5, 40, 56), 24, 16),
    "hunyuanvideo1.5": ((5, 64, 80), 32, 16),
    "ltx-video": ((9, 96, 128), 64, 32),
    "ltx2": ((9, 96, 128), 64, 32),
}
# diffusers' enable_tiling keywords for the same rule: size and stride, or (HunyuanVideo 1.5) size and overlap factor
REFERENCE_TILING = {
    "hunyuanvideo1.5": lambda size, stride: {
        "tile_sample_min_height": size, "tile_sample_min_width": size, "tile_latent_min_height": size // 16,
        "tile_latent_min_width": size // 16, "tile_overlap_factor": (size - stride) / size},
}


def _options(tiling: str = "spatial", size: int | None = None, stride: int | None = None) -> DiffusersVaeOptions:
    return DiffusersVaeOptions(tiling=tiling, tile_size=size, tile_stride=stride)


@pytest.mark.parametrize("name", list(TILED))
def test_tiled_fp32_encode_equals_diffusers_tiled_call_bit_for_bit(name, tmp_path):
    shape, size, stride = TILED[name]
    folder = save_tiny_vae(name, tmp_path / name)
    cfg = TokenizerConfig(name=name, checkpoint=str(folder), options=_options(size=size, stride=stride))
    tokenizer = registry.resolve("tokenizer", name).from_config(cfg, "cpu")
    untiled = registry.resolve("tokenizer", name).from_config(
        TokenizerConfig(name=name, checkpoint=str(folder)), "cpu")
    reference = getattr(diffusers, TINY_VAES[name][0]).from_pretrained(folder).eval()
    keywords = REFERENCE_TILING.get(name, lambda size, stride: {
        "tile_sample_min_height": size, "tile_sample_min_width": size,
        "tile_sample_stride_height": stride, "tile_sample_stride_width": stride})(size, stride)
    reference.enable_tiling(**keywords)
    reference.use_framewise_encoding = reference.use_framewise_decoding = False
    video = torch.rand(1, 3, *shape, generator=torch.Generator().manual_seed(3)) * 2 - 1
    with torch.no_grad():
        expected = reference_encode(name, reference, video)
        latent = tokenizer.encode(video)
        assert list(latent.shape[1:]) == list(tokenizer.latent_shape(*shape))
        assert torch.equal(latent, expected)
        assert not torch.equal(latent, untiled.encode(video))  # the tiles changed the numbers: another function

    recorded = tokenizer.fingerprint()["tiling"]
    json.dumps(recorded)
    assert (recorded["mode"], recorded["tile_size"], recorded["tile_stride"]) == ("spatial", size, stride)
    assert recorded["blend_latent"] == (size - stride) // tokenizer.spatial_factor
    assert untiled.fingerprint()["tiling"] == "none: the whole clip in one call"


def test_spatial_without_sizes_takes_diffusers_defaults_and_records_them(tmp_path):
    folder = save_tiny_vae("ltx2", tmp_path / "ltx2")
    cls = registry.resolve("tokenizer", "ltx2")
    tokenizer = cls.from_config(TokenizerConfig(name="ltx2", checkpoint=str(folder), options=_options()), "cpu")
    assert tokenizer.fingerprint()["tiling"]["tile_size"] == 512
    assert (tokenizer._vae.tile_sample_min_height, tokenizer._vae.tile_sample_stride_width) == (512, 448)


@pytest.mark.parametrize(("options", "message"), [
    (_options("temporal"), r"tokenizer.tiling='temporal' is not allowed; allowed: off, spatial"),
    (_options("off", size=256), r"tokenizer.tile_size=256 needs tokenizer.tiling=spatial"),
    (_options(size=100), r"tokenizer.tile_size=100 is not allowed; allowed: a positive multiple of the spatial "
                         r"factor 8"),
    (_options(size=256, stride=0), r"tokenizer.tile_stride=0 is not allowed; allowed: a positive multiple"),
    (_options(size=128, stride=256), r"tokenizer.tile_stride=256 is not allowed with tile_size=128; allowed: at "
                                     r"most tile_size"),
])
def test_bad_tiling_values_are_config_errors_naming_key_value_and_allowed(options, message):
    cls = registry.resolve("tokenizer", "hunyuanvideo")
    with pytest.raises(ConfigError, match=message):
        cls.check_settings(TokenizerConfig(name="hunyuanvideo", checkpoint="x", options=options))


def test_a_stride_hunyuanvideo15s_overlap_factor_cannot_give_is_refused():
    cls = registry.resolve("tokenizer", "hunyuanvideo1.5")
    cls.check_settings(TokenizerConfig(name="hunyuanvideo1.5", checkpoint="x", options=_options(size=256, stride=192)))
    with pytest.raises(ConfigError, match="tile_stride=16 with tile_size=80 is not allowed for "
                                          "AutoencoderKLHunyuanVideo15.*allowed with this tile_size: 32, 48, 64, 80"):
        cls.check_settings(TokenizerConfig(name="hunyuanvideo1.5", checkpoint="x",
                                           options=_options(size=80, stride=16)))


def test_a_config_stating_another_compression_ratio_is_refused_when_tiling(tmp_path):
    folder = save_tiny_vae("ltx2", tmp_path / "derived", spatial_compression_ratio=None,
                           temporal_compression_ratio=None)  # diffusers then derives 64 from the block layout
    cfg = TokenizerConfig(name="ltx2", checkpoint=str(folder), options=_options(size=64, stride=32))
    with pytest.raises(ConfigError, match="states a spatial compression ratio of 64, and it compresses by 32"):
        registry.resolve("tokenizer", "ltx2").from_config(cfg, "cpu")


def test_the_hunyuanvideo_preset_tiles_as_musubi_tuners_latent_caching():
    """musubi-tuner's `cache_latents.py --vae_tiling` tiles at its VAE config's sample_size (256) with an overlap
    factor of 0.25: a new tile every 256 * (1 - 0.25) = 192 pixels."""
    keys = PRESETS["hunyuanvideo-544p"]["tokenizer"]
    cls = registry.resolve("tokenizer", "hunyuanvideo")
    options = DiffusersVaeOptions(**{k: keys[k] for k in ("tiling", "tile_size", "tile_stride")})
    rule = cls.configured_tiling(TokenizerConfig(name="hunyuanvideo", checkpoint="x", options=options))
    assert (rule.size, rule.stride) == (256, int(256 * (1 - 0.25)))
