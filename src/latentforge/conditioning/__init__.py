"""Image-to-video conditioning backends registered by name: image encoders (the CLIP ViT-H/14 of Wan2.1 I2V)."""
