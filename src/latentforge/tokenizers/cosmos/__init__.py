"""The Cosmos video tokenizers (NVIDIA Cosmos-Tokenizer CV and DV): our modules, their checkpoints, the backends."""
