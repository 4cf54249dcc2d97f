"""Captioners: vision-language models that write a window's caption from its sampled frames (docs/captions.md)."""
