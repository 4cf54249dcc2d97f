"""The `conditioning` section: parsed from YAML and --set, checked before any model loads (the tokenizer's class
says which image latent it builds), and the image-to-video presets' geometry."""

from __future__ import annotations

import pytest

from latentforge import registry
from latentforge.builder.resume import resume_key
from latentforge.config.loading import load_config
from latentforge.config.presets import PRESETS
from latentforge.errors import ConfigError

BASE = {"dataset": {"reader": "table", "path": ["samples.csv"]}, "output": {"root": "cache"},
        "text": {"name": "none"}, "tokenizer": {"name": "wan2.1", "checkpoint": "Wan2.1_VAE.pth"}}


def _load(*overrides: str, preset: str | None = None, **sections):
    return load_config(preset=preset, extra={**BASE, **sections}, overrides=list(overrides))


def test_set_flags_fill_the_section():
    config = _load("conditioning.image_latent=wan-i2v", "conditioning.precision=bf16")
    assert (config.conditioning.image_latent, config.conditioning.precision) == ("wan-i2v", "bf16")
    assert config.to_dict()["conditioning"]["image_embeds"] == "none"


@pytest.mark.parametrize("overrides, fix", [
    (["conditioning.image_latent=wan-i2v", "tokenizer.name=wan2.2"], "tokenizer.name=wan2.1"),
    (["conditioning.image_latent=first-frame"], "tokenizer.name=wan2.2"),
    (["conditioning.image_latent=wan-i2v", "tokenizer.name=haar-4x8x8", "tokenizer.checkpoint=null"],
     "it builds: none"),
    (["conditioning.image_latent=y"], "allowed: none, wan-i2v, first-frame"),
    (["conditioning.precision=cosmos-bf16"], "allowed: fp32, bf16"),
    (["conditioning.image_embeds=siglip"], "conditioning.image_embeds='siglip'; allowed: none"),
    (["conditioning.image_encoder_path=clip"], "no image encoder runs"),
    (["conditioning.image_latent=wan-i2v", "frames.buckets=[[81,480,832],[81,832,480]]"], "one cache per shape"),
    (["conditioning.colour=red"], "allowed keys in conditioning: image_embeds"),
])
def test_refusals_name_the_fix(overrides, fix):
    with pytest.raises(ConfigError) as error:
        _load(*overrides)
    assert fix in str(error.value)


def test_an_image_encoder_needs_its_weights():
    with pytest.raises(ConfigError, match="needs its weights: give conditioning.image_encoder_path"):
        _load("conditioning.image_embeds=clip-vit-h14")
    assert _load("conditioning.image_embeds=clip-vit-h14", "conditioning.image_encoder_path=clip").conditioning


def test_the_resume_key_keeps_its_bytes_without_conditioning_and_changes_with_it(tmp_path):
    checkpoint = tmp_path / "Wan2.1_VAE.pth"
    checkpoint.write_bytes(b"weights")  # the key holds its SHA-256; nothing loads it
    assert "conditioning" not in resume_key(_load(f"tokenizer.checkpoint={checkpoint}"))["config"]
    key = resume_key(_load(f"tokenizer.checkpoint={checkpoint}", "conditioning.image_latent=wan-i2v",
                           "conditioning.image_embeds=none"))["config"]["conditioning"]
    assert key["image_latent"] == "wan-i2v" and "image_encoder_sha256" not in key


def test_the_resume_key_holds_the_image_encoders_weights_so_other_weights_at_the_path_are_refused(tmp_path):
    """New weights at the same path would mix two encoders' tokens in one cache: the key holds their SHA-256 (what
    sha256sum prints of the file), as it holds the tokenizer's."""
    import hashlib

    checkpoint = tmp_path / "Wan2.1_VAE.pth"
    checkpoint.write_bytes(b"weights")
    clip = tmp_path / "models_clip.pth"  # nothing loads it: the key holds its SHA-256
    overrides = (f"tokenizer.checkpoint={checkpoint}", "conditioning.image_embeds=clip-vit-h14",
                 f"conditioning.image_encoder_path={clip}")
    clip.write_bytes(b"first weights")
    first = resume_key(_load(*overrides))
    assert first["image_encoder_sha256"] == hashlib.sha256(b"first weights").hexdigest()
    clip.write_bytes(b"other weights")
    assert resume_key(_load(*overrides))["image_encoder_sha256"] == hashlib.sha256(b"other weights").hexdigest()


@pytest.mark.parametrize("preset, frames, fps, tokenizer, image_latent, image_embeds, y_shape", [
    ("wan2.1-i2v-480p", (81, 480, 832), "16", "wan2.1", "wan-i2v", "clip-vit-h14", (20, 21, 60, 104)),
    ("wan2.1-i2v-720p", (81, 720, 1280), "16", "wan2.1", "wan-i2v", "clip-vit-h14", (20, 21, 90, 160)),
    ("wan2.2-i2v-a14b", (81, 480, 832), "16", "wan2.1", "wan-i2v", None, (20, 21, 60, 104)),
    ("wan2.2-ti2v-5b", (121, 704, 1280), "24", "wan2.2", "first-frame", None, None),
])
def test_image_to_video_presets(preset, frames, fps, tokenizer, image_latent, image_embeds, y_shape):
    data = PRESETS[preset]
    assert (data["frames"]["num_frames"], data["frames"]["height"], data["frames"]["width"]) == frames
    assert (data["frames"]["fps"], data["tokenizer"]["name"]) == (fps, tokenizer)
    assert data["conditioning"]["image_latent"] == image_latent
    assert data["conditioning"].get("image_embeds") == image_embeds
    cls = registry.resolve("tokenizer", tokenizer)
    assert image_latent in cls.conditioning_latents
    if y_shape is not None:
        channels, *grid = cls.latent_shape(*frames)
        assert (4 + channels, *grid) == y_shape
    extra = {**BASE, "tokenizer": {"checkpoint": "vae.pth"}}
    if image_embeds is not None:  # a CLIP preset needs the image encoder's weights too
        with pytest.raises(ConfigError, match="needs its weights"):
            load_config(preset=preset, extra=extra)
        extra["conditioning"] = {"image_encoder_path": "Wan2.1-I2V-14B-480P-Diffusers"}
    config = load_config(preset=preset, extra=extra)
    assert (config.conditioning.image_latent, config.conditioning.image_embeds) == (image_latent,
                                                                                   image_embeds or "none")


def test_the_image_encoder_s_precisions_are_checked(monkeypatch):
    class Fp32Only:
        precisions = {"fp32": 1e-5}

    monkeypatch.setitem(registry._PLUGINS["image_encoder"], "fp32-only", Fp32Only)
    with pytest.raises(ConfigError, match="not a precision of image encoder fp32-only; allowed: fp32"):
        _load("conditioning.image_embeds=fp32-only", "conditioning.image_encoder_path=x",
              "conditioning.precision=bf16")


def test_the_size_estimate_counts_the_conditioning_streams():
    from latentforge.builder.estimate import IMAGE_EMBEDS_VALUES, conditioning_values, estimate_output_bytes

    config = _load("conditioning.image_latent=wan-i2v", "frames.num_frames=81", "frames.height=480",
                   "frames.width=832")
    assert conditioning_values(config) == (20 * 21 * 60 * 104, 1)
    plain = estimate_output_bytes(10, (16, 21, 60, 104), None, "float16")
    with_y = estimate_output_bytes(10, (16, 21, 60, 104), None, "float16", conditioning=conditioning_values(config))
    assert with_y - plain >= 10 * 20 * 21 * 60 * 104 * 2
    assert IMAGE_EMBEDS_VALUES == 257 * 1280
