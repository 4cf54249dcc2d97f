"""The `umt5` text backend: transformers UMT5EncoderModel (Wan2.1 uses google/umt5-xxl, D = 4096).

The folder has the `google/umt5-xxl` layout: config.json, weights (safetensors or pytorch_model*.bin) and
the tokenizer files (spiece.model and/or tokenizer.json). The numbers follow the same rules as `t5`.
"""

from __future__ import annotations

from .hf_encoder import HFTextEncoder


class UMT5TextEncoder(HFTextEncoder):
    """umT5 encoder + the folder's tokenizer; rows are `umt5_text_embeddings`."""

    name = "umt5"
    dataset_prefix = "umt5"
    model_class_name = "UMT5EncoderModel"
