"""The two ways a frame becomes CLIP's pixel values, one per checkpoint route; each says what it ran.

- `ProcessorPreprocess`: transformers' CLIPImageProcessor, exactly what diffusers' WanImageToVideoPipeline runs
  (`image_processor(images=image, return_tensors="pt")`): the pipeline folder's `image_processor/` when there is
  one, else the processor's own defaults (OpenAI CLIP's mean and std, bicubic resize of the short side, centre
  crop) at the model's image size. The short side is resized and the long side cropped, so a wide frame loses
  its sides. transformers picks its torchvision backend when torchvision is installed and its PIL backend when
  not; the two resize differently, so the backend's class is recorded.
- `OfficialPreprocess`: the official Wan code (`wan/image2video.py` then `CLIPModel.visual`): the frame to
  [-1, 1], the whole frame resized to image_size x image_size by bicubic `interpolate` (no crop: a wide frame
  is squeezed), back to [0, 1], then normalised with OpenAI CLIP's mean and std.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ..devices import copy_to_device

# OpenAI CLIP's normalisation, which the official Wan code (`_clip` in its clip.py) and CLIPImageProcessor share
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
_PROCESSOR_KEYS = ("do_resize", "size", "resample", "do_center_crop", "crop_size", "do_rescale", "rescale_factor",
                   "do_normalize", "image_mean", "image_std", "do_convert_rgb")  # fmt: skip


class ProcessorPreprocess:
    """CLIPImageProcessor from `folder` (a pipeline's image_processor/), or its defaults at `image_size`."""

    on_host = True  # the processor works on host arrays: hand it host frames, or it waits for the device's queue

    def __init__(self, folder: Path | None, image_size: int):
        import transformers

        if folder is not None:
            self.processor = transformers.CLIPImageProcessor.from_pretrained(folder, local_files_only=True)
        else:
            self.processor = transformers.CLIPImageProcessor(
                size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
            )
        self.source = "image_processor folder" if folder is not None else "CLIPImageProcessor defaults"

    def __call__(self, frames: torch.Tensor, device: torch.device) -> torch.Tensor:
        """uint8 [B, H, W, 3] -> float32 [B, 3, S, S] on `device`, sent without waiting for the device's queue."""
        images = list(frames.cpu().numpy())
        pixels = self.processor(images=images, return_tensors="pt")["pixel_values"].to(torch.float32)
        return copy_to_device(pixels, device)

    def record(self) -> dict[str, Any]:
        saved = json.loads(self.processor.to_json_string())  # what save_pretrained writes: plain JSON values
        settings = {key: saved.get(key) for key in _PROCESSOR_KEYS}
        return {"name": "clip-image-processor", "class": type(self.processor).__name__, "source": self.source,
                "settings": settings}  # fmt: skip


class OfficialPreprocess:
    """The official Wan preprocessing at `image_size` (224 for the released model), on the encoder's device."""

    on_host = False  # every step runs where the frames are sent: the encoder's device

    def __init__(self, image_size: int):
        self.image_size = image_size

    def __call__(self, frames: torch.Tensor, device: torch.device) -> torch.Tensor:
        on_device = copy_to_device(frames, device) if frames.device.type == "cpu" else frames.to(device)
        pixels = on_device.permute(0, 3, 1, 2)
        # TF.to_tensor(img).sub_(0.5).div_(0.5) in wan/image2video.py: to float, / 255, then to [-1, 1]
        signed = pixels.to(torch.float32).div(255).sub_(0.5).div_(0.5)
        size = (self.image_size, self.image_size)
        resized = torch.nn.functional.interpolate(signed, size=size, mode="bicubic", align_corners=False)
        unsigned = resized.mul_(0.5).add_(0.5)  # not clamped: bicubic overshoot passes through, as in the reference
        mean = torch.tensor(CLIP_MEAN, device=device)[:, None, None]
        std = torch.tensor(CLIP_STD, device=device)[:, None, None]
        return unsigned.sub_(mean).div_(std)

    def record(self) -> dict[str, Any]:
        return {"name": "wan-official", "size": self.image_size, "resize": "interpolate bicubic, align_corners=False",
                "crop": "none", "image_mean": list(CLIP_MEAN), "image_std": list(CLIP_STD)}  # fmt: skip

