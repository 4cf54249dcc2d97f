"""The presets (README.md lists them): each is a partial config that a YAML file or overrides refine."""

from __future__ import annotations

import copy
from typing import Any

from ..errors import ConfigError

# Every preset stores text trimmed (only each caption's tokens; latentforge's readers give back the zero-padded rows bit
# for bit: docs/text.md) but the perception layout, whose trainers open the shards' padded rows themselves.
PRESETS: dict[str, dict[str, Any]] = {
    # The perception cache: RGB + mask + depth through the Wan2.1 VAE, 48 latent channels, T5 text.
    # cover_crop keeps aspect ratio (OpenVid clips are mostly 16:9, 480x832 is 13:7.5; stretching would
    # distort masks and depth differently from what a player shows).
    "openvid-perception-stage1": {
        "frames": {"num_frames": 93, "height": 480, "width": 832, "fps": "source", "resize": "cover_crop"},
        "modalities": {"names": ["rgb", "mask", "depth"]},
        "tokenizer": {"name": "wan2.1", "precision": "bf16", "temporal_window": 16},
        "text": {"name": "t5", "max_length": 512, "storage": "padded"},  # its trainers read [512, D] rows as stored
        "output": {"latent_dataset": "perception_latent_state", "rows_per_shard": 3000, "batch_size": 1},
    },
    "cosmos-predict2-720p": {
        "frames": {"num_frames": 93, "height": 704, "width": 1280, "fps": "source", "resize": "stretch"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "wan2.1", "precision": "bf16", "temporal_window": 16},
        "text": {"name": "t5", "max_length": 512, "storage": "trimmed"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    "cosmos-predict2-480p": {
        "frames": {"num_frames": 93, "height": 432, "width": 768, "fps": "source", "resize": "stretch"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "wan2.1", "precision": "bf16", "temporal_window": 16},
        "text": {"name": "t5", "max_length": 512, "storage": "trimmed"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    "wan2.1-t2v-480p": {
        "frames": {"num_frames": 81, "height": 480, "width": 832, "fps": "16", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "wan2.1", "precision": "fp32"},
        "text": {"name": "umt5", "max_length": 512, "storage": "trimmed"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # Wan2.1 text-to-video at 480p in three buckets: landscape, portrait and square, 81 frames each. Each clip goes
    # to the bucket closest to its aspect that it fills (docs/frames.md); frames.num_frames/height/width are the
    # landscape bucket's, for tools that read them.
    "wan2.1-t2v-480p-buckets": {
        "frames": {"num_frames": 81, "height": 480, "width": 832, "fps": "16", "resize": "cover_crop",
                   "buckets": [[81, 480, 832], [81, 832, 480], [81, 624, 624]]},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "wan2.1", "precision": "fp32"},
        "text": {"name": "umt5", "max_length": 512, "storage": "trimmed"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # Cosmos-Predict1 diffusion Text2World / Video2World: 121 frames of 704x1280 at 24 fps through the continuous
    # CV8x8x8 tokenizer (cosmos-predict1 diffusion/inference/world_generation_pipeline.py) -> [16, 16, 88, 160].
    "cosmos-predict1-diffusion": {
        "frames": {"num_frames": 121, "height": 704, "width": 1280, "fps": "24", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "cosmos-cv8x8x8", "precision": "bf16"},
        "text": {"name": "t5", "max_length": 512, "storage": "trimmed"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # Cosmos-Predict1 autoregressive Video2World: 33 frames of 640x1024 through the discrete DV8x16x16 tokenizer
    # (cosmos-predict1 autoregressive/inference/world_generation_pipeline.py) -> token ids [1, 5, 40, 64], a
    # sequence of 12,800 tokens.
    "cosmos-predict1-autoregressive": {
        "frames": {"num_frames": 33, "height": 640, "width": 1024, "fps": "source", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "cosmos-dv8x16x16", "precision": "bf16"},
        "text": {"name": "t5", "max_length": 512, "storage": "trimmed"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # Wan2.2 TI2V-5B fine-tuning: its own VAE (48 channels, 4x16x16) in fp32 as official Wan2.2 runs it, umT5 text
    # (d_model 4096), 121 frames of 704x1280 at 24 fps -> latent [48, 31, 44, 80] per modality (official Wan2.2
    # wan/configs/wan_ti2v_5B.py: frame_num 121, sample_fps 24; SUPPORTED_SIZES 'ti2v-5B': 704*1280, 1280*704).
    # Its image condition is the latent of frame 0 alone (wan/textimage2video.py), which in fp32 is latent frame 0
    # of the clip bit for bit (tests/pipeline/test_image_condition.py): nothing extra is stored.
    "wan2.2-ti2v-5b": {
        "frames": {"num_frames": 121, "height": 704, "width": 1280, "fps": "24", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "wan2.2", "precision": "fp32"},
        "text": {"name": "umt5", "max_length": 512, "storage": "trimmed"},
        "conditioning": {"image_latent": "first-frame"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # Wan2.1 I2V-14B: 81 frames at 16 fps (official wan/configs shared_config: frame_num 81, sample_fps 16;
    # diffusers' WanImageToVideoPipeline defaults num_frames=81, height=480, width=832). Beside the latent: the
    # CLIP ViT-H/14 tokens of frame 0 and the conditioning latent y (mask + encode of [frame 0, zeros]) ->
    # [20, 21, 60, 104]. Give the CLIP weights with conditioning.image_encoder_path.
    "wan2.1-i2v-480p": {
        "frames": {"num_frames": 81, "height": 480, "width": 832, "fps": "16", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "wan2.1", "precision": "fp32"},
        "text": {"name": "umt5", "max_length": 512, "storage": "trimmed"},
        "conditioning": {"image_embeds": "clip-vit-h14", "image_latent": "wan-i2v", "precision": "fp32"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # the same at 720p (the Wan2.1 I2V-14B-720P model; 720*1280 is among the official supported sizes)
    "wan2.1-i2v-720p": {
        "frames": {"num_frames": 81, "height": 720, "width": 1280, "fps": "16", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "wan2.1", "precision": "fp32"},
        "text": {"name": "umt5", "max_length": 512, "storage": "trimmed"},
        "conditioning": {"image_embeds": "clip-vit-h14", "image_latent": "wan-i2v", "precision": "fp32"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # Wan2.2 I2V-A14B: the Wan2.1 VAE (wan/configs/wan_i2v_A14B.py: vae_checkpoint Wan2.1_VAE.pth, vae_stride
    # 4x8x8), 81 frames at 16 fps (shared_config), 480*832 among its SUPPORTED_SIZES (720*1280 too: override
    # frames.height/width). The same y as Wan2.1 I2V, no CLIP (wan/image2video.py of Wan2.2 encodes no image tokens).
    "wan2.2-i2v-a14b": {
        "frames": {"num_frames": 81, "height": 480, "width": 832, "fps": "16", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "wan2.1", "precision": "fp32"},
        "text": {"name": "umt5", "max_length": 512, "storage": "trimmed"},
        "conditioning": {"image_latent": "wan-i2v", "precision": "fp32"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # The HunyuanVideo and LTX models condition on LLaVA-Llama-3 / Qwen2.5-VL / T5-XXL / Gemma-3 text features that
    # latentforge does not compute: these presets cache the video latents only (text none); their trainers encode
    # the captions themselves.
    # HunyuanVideo (1.0): its 540p generation size, 129 frames of 544x960 at 24 fps (diffusers' HunyuanVideoPipeline
    # takes num_frames=129; official HunyuanVideo lists 544x960 among its 540p sizes) -> latent [16, 33, 68, 120].
    # The whole clip does not fit in memory (the mid-block attention alone asks for 270 GiB in bf16), so it is
    # encoded in spatial tiles as musubi-tuner's HunyuanVideo latent caching does (`--vae_tiling`: tiles of its VAE
    # config's sample_size 256 pixels, overlap factor 0.25, so a new tile every 192 pixels).
    "hunyuanvideo-544p": {
        "frames": {"num_frames": 129, "height": 544, "width": 960, "fps": "24", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "hunyuanvideo", "precision": "fp32", "tiling": "spatial", "tile_size": 256,
                      "tile_stride": 192},
        "text": {"name": "none"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # HunyuanVideo 1.5 at 480p: 121 frames of 480x848 at 24 fps (diffusers' HunyuanVideo15Pipeline takes
    # num_frames=121) -> latent [32, 31, 30, 53].
    "hunyuanvideo1.5-480p": {
        "frames": {"num_frames": 121, "height": 480, "width": 848, "fps": "24", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "hunyuanvideo1.5", "precision": "fp32"},
        "text": {"name": "none"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # LTX-Video 0.9.x: the LTX-Video-Trainer's configs validate at video_dims [768, 448, 89] (width, height,
    # frames); 25 fps is diffusers' LTXPipeline frame_rate -> latent [128, 12, 14, 24].
    "ltx-video-448p": {
        "frames": {"num_frames": 89, "height": 448, "width": 768, "fps": "25", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "ltx-video", "precision": "fp32"},
        "text": {"name": "none"},
        "output": {"latent_dataset": "video_latent_state"},
    },
    # LTX-2: diffusers' LTX2Pipeline defaults, 121 frames of 512x768 at 24 fps -> latent [128, 16, 16, 24].
    "ltx2-512p": {
        "frames": {"num_frames": 121, "height": 512, "width": 768, "fps": "24", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "ltx2", "precision": "fp32"},
        "text": {"name": "none"},
        "output": {"latent_dataset": "video_latent_state"},
    },
}


def preset_dict(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; allowed: {', '.join(sorted(PRESETS))}")
    return {"preset": name, **copy.deepcopy(PRESETS[name])}
