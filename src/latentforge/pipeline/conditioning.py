"""A batch's image conditioning, built from each clip's own pixel frame 0 on the encoder's device
(docs/conditioning.md): what an image-to-video trainer reads beside the clip's latent.

- `wan-i2v` (Wan2.1 I2V-14B, Wan2.2 I2V-A14B): the conditioning latent y = a 4-channel frame mask (ones over
  latent frame 0, which covers pixel frame 0 repeated 4 times; zeros elsewhere, as diffusers'
  WanImageToVideoPipeline.prepare_latents and Wan's image2video.py lay it out) concatenated with the tokenizer's
  normalised encode of [frame 0, zeros x (F - 1)] (zeros in [-1, 1] pixel space).
- `first-frame` (Wan2.2 TI2V-5B): the latent of frame 0 alone, which a causal tokenizer already stores as latent
  frame 0 of the clip (bit for bit in fp32, tests/pipeline/test_image_condition.py): nothing extra is stored.
- image tokens (`image_embeds`, e.g. CLIP ViT-H/14): a registered image encoder run on frame 0 as uint8 RGB.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from .. import registry
from ..cache.conditioning_streams import (
    CLIP_IMAGE_EMBEDS,
    IMAGE_COND_LATENT,
    MASK_CHANNELS,
    ConditioningSection,
    ConditioningStream,
)
from ..conditioning.image_encoder import ImageEncoder
from ..config import BuildConfig
from ..devices import copy_to_host_soon
from ..tokenizers.base import Tokenizer

WAN_I2V_RULE = ("mask: ones over latent frame 0, zeros elsewhere (4 channels); then the tokenizer's normalised "
                "encode of [pixel frame 0, zeros x (F - 1)]")
FIRST_FRAME_RULE = ("latent frame 0 of the clip's rgb latent: the tokenizer's encode of pixel frame 0 alone equals "
                    "it bit for bit in fp32 (causal encoder, a first chunk of one frame)")


def wan_i2v_mask(batch: int, latent_frames: int, height: int, width: int, device: torch.device) -> torch.Tensor:
    """[B, 4, T', H', W'] float32: channel k of latent frame t stands for pixel frame 4t + k - 3 (frame 0 repeated
    to fill latent frame 0's four slots); a slot is 1 where that pixel frame is given (only frame 0)."""
    mask = torch.zeros(batch, MASK_CHANNELS, latent_frames, height, width, device=device)
    mask[:, :, 0] = 1.0
    return mask


def first_frame_video(video: torch.Tensor) -> torch.Tensor:
    """[B, 3, F, H, W]: pixel frame 0 of `video`, then F - 1 frames of pixel value 0.0 (mid grey in [-1, 1])."""
    condition = torch.zeros_like(video)
    condition[:, :, 0] = video[:, :, 0]
    return condition


def frame0_uint8(video: torch.Tensor) -> torch.Tensor:
    """uint8 [B, H, W, 3] RGB of pixel frame 0: the inverse of the pixel table (v -> v / 127.5 - 1), exact for
    frames that came through it, and the nearest uint8 for frames converted on the device."""
    frame = video[:, :, 0].float().add(1.0).mul(127.5).round_().clamp_(0, 255)
    return frame.to(torch.uint8).permute(0, 2, 3, 1).contiguous()


class ConditioningStage:
    """A rank's conditioning: the tokenizer the extra encode runs on, the image encoder, and the streams they
    produce per sample."""

    def __init__(self, config: BuildConfig, tokenizer: Tokenizer | None, image_encoder: ImageEncoder | None):
        self.settings = config.conditioning
        self.tokenizer, self.image_encoder = tokenizer, image_encoder
        frames, storage = config.frames, config.output.storage_dtype
        streams = []
        if self.settings.image_latent == "wan-i2v" and tokenizer is not None:
            channels, *grid = type(tokenizer).latent_shape(frames.num_frames, frames.height, frames.width)
            streams.append(ConditioningStream(IMAGE_COND_LATENT, (MASK_CHANNELS + channels, *grid), storage,
                                              {"rule": WAN_I2V_RULE, "tokenizer": tokenizer.fingerprint()}))
        if image_encoder is not None:
            streams.append(ConditioningStream(CLIP_IMAGE_EMBEDS, (int(image_encoder.tokens), int(image_encoder.width)),
                                              storage, image_encoder.fingerprint()))
        self.streams = tuple(streams)
        self._in_latent = None
        if self.settings.image_latent == "first-frame":
            self._in_latent = {"dataset": config.output.latent_dataset, "modality": "rgb", "latent_frames": [0, 1],
                               "rule": FIRST_FRAME_RULE}

    @classmethod
    def load(cls, config: BuildConfig, tokenizer: Tokenizer) -> ConditioningStage | None:
        """The stage `config.conditioning` asks for (None when it asks for nothing), on the tokenizer's device.
        The extra encode reuses the clip's tokenizer when conditioning.precision is its precision, else loads the
        same checkpoint at that precision."""
        settings = config.conditioning
        if settings.image_latent == "none" and settings.image_embeds == "none":
            return None
        encoder_tokenizer = None
        if settings.image_latent == "wan-i2v":
            encoder_tokenizer = tokenizer
            if settings.precision != config.tokenizer.precision:
                cfg = dataclasses.replace(config.tokenizer, precision=settings.precision)
                encoder_tokenizer = registry.resolve("tokenizer", cfg.name).from_config(cfg, tokenizer.device)
        image_encoder = None
        if settings.image_embeds != "none":
            image_encoder = registry.resolve("image_encoder", settings.image_embeds).load(
                settings.image_encoder_path, str(tokenizer.device), settings.precision, settings.image_encoder_sha256)
        return cls(config, encoder_tokenizer, image_encoder)

    def section(self) -> ConditioningSection:
        """What cache_config.json records of the conditioning."""
        return ConditioningSection(self.settings.image_latent, self.settings.image_embeds, self.settings.precision,
                                   self.streams, self._in_latent)

    def encode(self, video: torch.Tensor, encode_clip: Callable[[torch.Tensor], torch.Tensor] | None = None
               ) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        """For a batch's rgb input [B, 3, F, H, W] in [-1, 1]: the clip's own latent, `encode_clip(video)` (None
        without it), and {stream name: float32 [B, ...] on the device}; launched, not waited for.

        An image encoder that preprocesses on the host gets frame 0 through a copy started before the clip's and
        y's encodes are queued, and the host waits for that copy only after queueing them: the device stays busy
        while the host preprocesses (a plain `.cpu()` there drained the device's queue once per batch)."""
        take_frame0: Callable[[], torch.Tensor] | None = None
        if self.image_encoder is not None:
            frame0 = frame0_uint8(video)
            take_frame0 = copy_to_host_soon(frame0) if self.image_encoder.host_frames else lambda: frame0
        clip = encode_clip(video) if encode_clip is not None else None
        out: dict[str, torch.Tensor] = {}
        if self.tokenizer is not None:
            latent = self.tokenizer.encode(first_frame_video(video)).float()
            batch, _, frames, height, width = latent.shape
            out[IMAGE_COND_LATENT] = torch.cat([wan_i2v_mask(batch, frames, height, width, latent.device), latent], 1)
        if take_frame0 is not None:  # set exactly when there is an image encoder
            out[CLIP_IMAGE_EMBEDS] = self.image_encoder.encode(take_frame0()).float()
        return clip, out
