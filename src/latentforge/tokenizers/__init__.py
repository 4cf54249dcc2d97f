"""Video tokenizers registered by name: the analytic haar-4x8x8, the Wan2.1 VAE (checkpoints, fast path) and the
Wan2.2 VAE."""
