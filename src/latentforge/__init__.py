"""latentforge: raw video datasets -> training-ready latent caches, and back to training loops."""

__version__ = "0.1.0"
