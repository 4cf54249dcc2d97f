"""Loading a build config: its layers merged and parsed, the reader chosen, and every check run, each backend's by
that backend, before any model loads."""

from .load import load_config

__all__ = ["load_config"]
