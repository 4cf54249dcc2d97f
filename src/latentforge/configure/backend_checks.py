"""Each backend a config names checks its own part, through its class: the text encoder its precisions, the reader
its modalities and keys, the sink its root and settings, the tokenizer its settings and geometry (for every bucket
too), the executor its settings. Nothing here branches on a backend's name."""

from __future__ import annotations

from .. import registry
from ..config.buckets import parse_buckets
from ..config.schema import BuildConfig
from ..errors import ConfigError


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
