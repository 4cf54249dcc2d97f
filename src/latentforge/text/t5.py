"""The `t5` text backend: transformers T5EncoderModel (Cosmos-Predict2 uses google-t5/t5-11b, D = 1024)."""

from __future__ import annotations

from .hf_encoder import HFTextEncoder


class T5TextEncoder(HFTextEncoder):
    """T5 encoder + the folder's tokenizer; rows are Cosmos' `t5_text_embeddings`."""

    name = "t5"
    dataset_prefix = "t5"
    model_class_name = "T5EncoderModel"
