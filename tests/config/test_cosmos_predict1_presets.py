"""The Cosmos-Predict1 presets load, pass the config checks given a checkpoint, and give the shapes the
Cosmos-Predict1 pipelines use (diffusion: CV8x8x8 latents of 121x704x1280; autoregressive: DV8x16x16 ids of
33x640x1024, 12,800 tokens)."""

from __future__ import annotations

import pytest

from latentforge import registry
from latentforge.builder.estimate import output_shapes
from latentforge.config.loading import load_config
from latentforge.errors import ConfigError


@pytest.mark.parametrize("preset, tokenizer, shape", [
    ("cosmos-predict1-diffusion", "cosmos-cv8x8x8", (16, 16, 88, 160)),
    ("cosmos-predict1-autoregressive", "cosmos-dv8x16x16", (1, 5, 40, 64)),
])
def test_cosmos_predict1_presets(preset, tokenizer, shape):
    extra = {"dataset": {"reader": "table", "path": ["samples.csv"]}, "output": {"root": "cache"},
             "text": {"path": "t5"}}
    with pytest.raises(ConfigError, match="tokenizer.checkpoint is required"):
        load_config(preset=preset, extra=extra)
    config = load_config(preset=preset, extra={**extra, "tokenizer": {"checkpoint": "tokenizer-folder"}})
    assert config.tokenizer.name == tokenizer and config.tokenizer.precision == "bf16"
    assert output_shapes(config)[0] == shape
    cls = registry.resolve("tokenizer", tokenizer)
    assert (cls.output == "tokens") == (tokenizer == "cosmos-dv8x16x16")
