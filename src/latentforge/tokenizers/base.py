"""The tokenizer interface every backend implements (registered by name in registry.py)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from ..config import TokenizerConfig
from ..config.checks import token_storage_dtype
from ..config.option_roles import EXECUTION, keys_with_role
from ..config.schema import NoOptions
from ..decode.device_convert import yuv_to_input
from ..decode.modality_frames import ModalityFrames
from ..decode.yuv_format import YuvFormat
from ..devices import copy_to_device
from ..errors import ConfigError
from ..hashing import sha256_file

SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class Tokenizer(ABC):
    """A video tokenizer: [B,3,T,H,W] pixels in [-1,1] <-> [B,C,T',H',W'] normalised latents.

    Geometry is known from class attributes alone, so configs are validated before any weights load.
    """

    name: str = ""
    latent_channels: int = 16  # channels per modality (a token tokenizer: 1, its one id stream)
    # "latents": encode returns float latents; "tokens": encode returns integer token ids [B,1,T',H',W'] in
    # [0, vocabulary), which a cache stores as unsigned integers (token_storage_dtype)
    output: ClassVar[str] = "latents"
    # the models whose trainers read these latents, as export targets name them ("wan2.1", "hunyuanvideo", ...):
    # an export target writes only the families it declares. Empty: no trainer's format is known to read them
    latent_family: ClassVar[str] = ""
    vocabulary: ClassVar[int] = 0  # tokens: the number of distinct ids
    temporal_factor: int = 4
    spatial_factor: int = 8
    causal: bool = True  # latent frame 0 depends only on pixel frame 0
    # the conditioning.image_latent kinds this tokenizer builds beside the clip's latent (docs/conditioning.md):
    # "wan-i2v" (mask + the encode of [frame 0, zeros], Wan I2V's `y`), "first-frame" (latent frame 0 of the clip)
    conditioning_latents: ClassVar[tuple[str, ...]] = ()
    # precision mode -> the relative L2 by which a re-encode on another device or software stack may differ
    # (docs/verify.md); the keys are the allowed values of tokenizer.precision.
    precisions: ClassVar[dict[str, float]] = {"fp32": 1e-5}
    # its own tokenizer.* keys beyond name, checkpoint, sha256 and precision, as a dataclass with their defaults;
    # load_config parses them into TokenizerConfig.options (config/loading/backend_options.py)
    options_class: ClassVar[type] = NoOptions
    # fingerprint keys that name the code path, not the function (beside its options of role EXECUTION)
    code_path_keys: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, device: torch.device | str = "cpu"):
        self.device = torch.device(device)

    @classmethod
    def check_geometry(cls, num_frames: int, height: int, width: int) -> None:
        """Raise ConfigError when a clip of this size cannot be encoded exactly."""
        if cls.causal and (num_frames - 1) % cls.temporal_factor != 0:
            lo = (num_frames - 1) // cls.temporal_factor * cls.temporal_factor + 1
            raise ConfigError(
                f"num_frames={num_frames}: the causal {cls.temporal_factor}x tokenizer {cls.name!r} needs "
                f"(num_frames - 1) % {cls.temporal_factor} == 0; use {lo} or {lo + cls.temporal_factor}"
            )
        for label, value in (("height", height), ("width", width)):
            if value % cls.spatial_factor != 0:
                raise ConfigError(
                    f"{label}={value} is not divisible by the spatial factor {cls.spatial_factor} of "
                    f"{cls.name!r}; use {value // cls.spatial_factor * cls.spatial_factor} or "
                    f"{(value // cls.spatial_factor + 1) * cls.spatial_factor}"
                )

    @classmethod
    def check_settings(cls, cfg: TokenizerConfig) -> None:
        """ConfigError for tokenizer settings this backend cannot take; reads no file (config time)."""
        if cfg.precision not in cls.precisions:
            raise ConfigError(f"tokenizer.precision={cfg.precision!r} is not allowed for {cls.name}; allowed: "
                              f"{', '.join(cls.precisions)}")
        if cfg.sha256 is not None and not SHA256_HEX.match(cfg.sha256.strip().lower()):
            raise ConfigError(f"tokenizer.sha256={cfg.sha256!r} is not a SHA-256 (64 hex digits, as `sha256sum "
                              "CHECKPOINT` prints)")

    @classmethod
    def preflight(cls, cfg: TokenizerConfig, device: str = "cpu") -> None:
        """Read and check the weights `cfg` names (existence, SHA-256, format) and the packages running them on
        `device` needs, before a build writes anything; raises the error the build would otherwise hit in its
        first rank. Nothing to do without weights."""

    @classmethod
    def process_environment(cls, cfg: TokenizerConfig, device: str) -> dict[str, str]:
        """The variables an encoder process sets for this backend on `device` before its model loads, unless the
        user set them. They choose kernels, so a build reads them to know, before any model loads, the
        environment (pipeline/environment.py) its ranks will record. None by default."""
        return {}

    @classmethod
    def execution_keys(cls) -> frozenset[str]:
        """Fingerprint keys that change memory use, speed, software or the code path, not the function: deep
        verify compares bit for bit only where they are unchanged, and never refuses a tokenizer for them."""
        return keys_with_role(cls.options_class, EXECUTION) | cls.code_path_keys

    @classmethod
    def latent_shape(cls, num_frames: int, height: int, width: int) -> tuple[int, int, int, int]:
        """[C, T', H', W'] of one modality's latent."""
        frames = 1 + (num_frames - 1) // cls.temporal_factor if cls.causal else num_frames // cls.temporal_factor
        return (cls.latent_channels, frames, height // cls.spatial_factor, width // cls.spatial_factor)

    @classmethod
    def latent_storage_dtype(cls, storage_dtype: str) -> str:
        """The dtype a cache stores this tokenizer's output in: output.storage_dtype for latents, the narrowest
        unsigned integer that holds every id for tokens."""
        return storage_dtype if cls.output == "latents" else token_storage_dtype(cls.vocabulary)

    @classmethod
    def checkpoint_digest(cls, checkpoint: str | None) -> str | None:
        """SHA-256 of the weights `checkpoint` names, as the fingerprint records it (None without weights)."""
        return None if not checkpoint else sha256_file(Path(checkpoint))

    @abstractmethod
    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """[B,3,T,H,W] float in [-1,1] on self.device -> [B,C,T',H',W'] float32 normalised latent (a token
        tokenizer: [B,1,T',H',W'] int64 ids)."""

    @abstractmethod
    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """[B,C,T',H',W'] normalised latent -> [B,3,T,H,W] float32 in [-1,1]."""

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """Everything that defines the function computed (name, checkpoint SHA-256, precision, constants).

        Recorded in cache_config.json; never contains paths, hosts or times.
        """


# uint8 v -> v / 127.5 - 1, computed once in float64 and rounded once.
PIXEL_TABLE = torch.from_numpy(np.arange(256, dtype=np.float64) / 127.5 - 1.0).to(torch.float32)
_DEVICE_TABLES: dict[torch.device, torch.Tensor] = {}


def pixel_table(device: torch.device | str) -> torch.Tensor:
    """PIXEL_TABLE on `device`, copied there once (a copy from pageable memory would make the host wait for
    everything queued on the device)."""
    device = torch.device(device)
    table = _DEVICE_TABLES.get(device)
    if table is None:
        table = _DEVICE_TABLES[device] = PIXEL_TABLE.to(device)
    return table


def pixels_to_input(frames: np.ndarray | torch.Tensor | ModalityFrames, device: torch.device | str) -> torch.Tensor:
    """[T,H,W,3] (or [B,T,H,W,3]) uint8 or float32-in-[-1,1], or one sample's ModalityFrames -> float32
    [3,T,H,W] (or [B,3,T,H,W]) on device.

    uint8 travels to the device as uint8 and is mapped there by the 256-entry table.
    """
    if isinstance(frames, ModalityFrames):
        return frames_to_input([frames], device)[0]
    tensor = torch.as_tensor(frames).to(device, non_blocking=True)
    if tensor.dtype == torch.uint8:
        tensor = pixel_table(tensor.device)[tensor.long()]
    elif tensor.dtype != torch.float32:
        raise TypeError(f"frames must be uint8 or float32, got {tensor.dtype}")
    return tensor.movedim(-1, -4).contiguous()


@dataclass(frozen=True)
class DeviceFrames:
    """One sample's compact frames of one modality on the device (or on their way there)."""

    values: torch.Tensor
    colours: torch.Tensor | None  # masks: the palette's colours in [-1, 1], [N, 3] float32
    yuv: YuvFormat | None = None  # frames.resize_backend=device: values are YUV planes (decode/device_convert.py)


def upload_frames(frames: ModalityFrames, device: torch.device | str) -> DeviceFrames:
    """Start the copy of compact frames to `device` without waiting for it: from page-locked memory (the
    frame slots) it is DMA, so the host must keep `frames` unchanged until the device has read them."""
    device = torch.device(device)
    values = torch.as_tensor(frames.values).to(device, non_blocking=True)
    colours = None
    if frames.palette is not None:  # a few colours: looked up on the host, exactly the device's gather
        colours = copy_to_device(PIXEL_TABLE[torch.as_tensor(frames.palette).long()], device)
    return DeviceFrames(values, colours, frames.yuv)


def expand_frames(batch: list[DeviceFrames]) -> torch.Tensor:
    """One modality of B samples on the device -> float32 [B,3,T,H,W], expanded there exactly as
    ModalityFrames.expanded() followed by the pixel table would on the host."""
    expanded = []
    for frames in batch:
        values = frames.values
        if frames.yuv is not None:  # YUV planes -> converted, resized levels -> [-1, 1], made [3, T, H, W]
            expanded.append(yuv_to_input(values, frames.yuv, pixel_table(values.device)).movedim(0, -1))
        elif frames.colours is not None:  # ids -> colour in [-1, 1], one gather
            expanded.append(frames.colours[values.long()])
        elif values.ndim == 3:  # depth: the value in 3 channels
            expanded.append(values.unsqueeze(-1).expand(*values.shape, 3))
        elif values.dtype == torch.uint8:
            expanded.append(pixel_table(values.device)[values.long()])
        elif values.dtype == torch.float32:
            expanded.append(values)
        else:
            raise TypeError(f"frames must be uint8 or float32, got {values.dtype}")
    stacked = expanded[0][None] if len(expanded) == 1 else torch.stack(expanded)
    return stacked.movedim(-1, -4).contiguous()


def frames_to_input(batch: list[ModalityFrames], device: torch.device | str) -> torch.Tensor:
    """One modality of B samples -> float32 [B,3,T,H,W] on device: each sample's frames travel in their compact
    form and are expanded on the device (upload_frames, then expand_frames)."""
    return expand_frames([upload_frames(frames, device) for frames in batch])
