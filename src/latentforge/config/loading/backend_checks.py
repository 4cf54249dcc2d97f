"""Each backend a config names checks its own part, through its class: the text encoder its precisions, the reader
its modalities and keys, the sink its root and settings, the tokenizer its settings and geometry (for every bucket
too), the executor its settings, the audio tokenizer its settings. Nothing here branches on a backend's name."""

from __future__ import annotations

from ... import registry
from ...errors import ConfigError
from ..buckets import parse_buckets
from ..schema import BuildConfig


def check_backends(config: BuildConfig) -> None:
    text = config.text
    if text.name != "none":
        allowed = registry.resolve("text", text.name).precisions
        if text.precision not in allowed:
            raise ConfigError(f"text.precision={text.precision!r} is not allowed for {text.name}; allowed: "
                              f"{', '.join(allowed)} (fp16 overflows T5's feed-forward activations)")
    registry.resolve("reader", config.dataset.reader).check_config(config)
    registry.resolve("sink", config.output.sink).check_config(config)
    tokenizer_cls = registry.resolve("tokenizer", config.tokenizer.name)
    tokenizer_cls.check_settings(config.tokenizer)
    tokenizer_cls.check_geometry(config.frames.num_frames, config.frames.height, config.frames.width)
    for i, bucket in enumerate(parse_buckets(config.frames)):
        try:
            tokenizer_cls.check_geometry(bucket.num_frames, bucket.height, bucket.width)
        except ConfigError as error:
            raise ConfigError(f"frames.buckets[{i}] {bucket.name}: {error}") from None
    registry.resolve("executor", config.run.executor).check_config(config)
    _check_image_latent(config, tokenizer_cls)
    conditioning = config.conditioning
    if conditioning.image_embeds != "none":
        allowed = registry.resolve("image_encoder", conditioning.image_embeds).precisions
        if conditioning.precision not in allowed:
            raise ConfigError(f"conditioning.precision={conditioning.precision} is not a precision of image encoder "
                              f"{conditioning.image_embeds}; allowed: {', '.join(allowed)}")
    if config.audio.tokenizer != "none":
        registry.resolve("audio_tokenizer", config.audio.tokenizer).check_settings(config.audio)


def _check_image_latent(config: BuildConfig, tokenizer_cls: type) -> None:
    """The tokenizer declares which conditioning latents it builds (Tokenizer.conditioning_latents)."""
    conditioning = config.conditioning
    if conditioning.image_latent == "none":
        return
    if conditioning.image_latent not in tokenizer_cls.conditioning_latents:
        builds = ", ".join(tokenizer_cls.conditioning_latents) or "none"
        raise ConfigError(
            f"conditioning.image_latent={conditioning.image_latent} is not built by tokenizer {config.tokenizer.name} "
            f"(it builds: {builds}); wan-i2v needs the Wan2.1 VAE (tokenizer.name=wan2.1, as Wan2.1 I2V and Wan2.2 "
            "I2V-A14B use), first-frame the Wan2.2 VAE (tokenizer.name=wan2.2, as Wan2.2 TI2V-5B uses)")
    if conditioning.precision not in tokenizer_cls.precisions:
        raise ConfigError(f"conditioning.precision={conditioning.precision} is not a precision of tokenizer "
                          f"{config.tokenizer.name}; allowed: {', '.join(tokenizer_cls.precisions)}")
