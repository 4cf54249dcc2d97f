"""Video tokenizers registered by name: the analytic haar-4x8x8 and the Wan2.1 VAE (checkpoints, fast path)."""
