"""A tokenizer over one of diffusers' video VAE classes, loaded from a diffusers folder or, where diffusers converts
the class's official keys, an official single file (single_file_vae.py): what the HunyuanVideo and
LTX tokenizers share (checkpoint route, SHA-256 pin, architecture and exact key checks, precisions, the whole-clip
or spatially tiled encode and decode (vae_tiling.py), the fingerprint). Each subclass names its class and its
latent normalisation; one whose official files diffusers cannot convert (hunyuan/official_vae.py) says where their
config and tensors come from (resolve, read_config, read_state).

diffusers' `from_pretrained` and `from_single_file` would fill a missing tensor with random values and only warn, so
the weights are read here and must be exactly the model's tensors.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import diffusers
import torch

from ..config import TokenizerConfig
from ..config.option_roles import LOCATION, PERMISSION, option
from ..devices import tf32_off
from ..errors import ConfigError
from .base import Tokenizer
from .checkpoints import (
    CheckpointError,
    CheckpointSource,
    check_keys,
    check_sha256,
    checkpoint_sha256,
    read_weight_files,
    resolve_checkpoint,
)
from .cpu_bf16 import check_cpu_bf16
from .single_file_vae import config_folder, read_single_file_vae, single_file_source
from .vae_tiling import TILING_OFF, WHOLE_CLIP, TileRule, enable_tiling, tile_rule

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SINGLE_FILE = "single-file"  # what a file path resolves to: an official single file


@dataclass(frozen=True)
class DiffusersVaeOptions:
    """The keys (tokenizer.KEY) of the tokenizers over a diffusers VAE class."""

    # bf16 on a CPU without bf16 instructions is very slow; the pre-flight refuses it unless this is set
    allow_slow_cpu_bf16: bool = option(False, PERMISSION)
    # "spatial": diffusers' tiled encode and decode, for clips whose whole-clip encode does not fit in memory. It
    # changes the latent, so these three keys define the function (no role): recorded and part of the resume key
    tiling: str = TILING_OFF
    tile_size: int | None = None  # pixels; None: diffusers' default for the class (default_tile)
    tile_stride: int | None = None
    # a single-file checkpoint's diffusers config.json (its folder): the file holds none. Where it is looked up
    # only; what it says is recorded in the fingerprint's `architecture`
    vae_config: str | None = option(None, LOCATION)


def vae_options(cfg: TokenizerConfig) -> DiffusersVaeOptions:
    return cfg.options if isinstance(cfg.options, DiffusersVaeOptions) else DiffusersVaeOptions()


class DiffusersVaeTokenizer(Tokenizer):
    """[B,3,T,H,W] in [-1,1] -> the normalised posterior mean, through diffusers' class `model_class` run on the
    whole clip (slicing and frame-wise tiles off; spatial tiles only with tokenizer.tiling=spatial) with TF32 off
    in fp32."""

    model_class: ClassVar[str]  # the diffusers class name, as a folder's config.json `_class_name` says
    family: ClassVar[str]  # the model's name in messages
    checkpoint_advice: ClassVar[str]  # the folders to pass, in every refusal
    # config.json values the architecture needs beyond the geometry (widths and depths are free, so a narrow
    # model of the same architecture loads in tests and benchmarks)
    required_config: ClassVar[dict[str, Any]] = {"in_channels": 3, "out_channels": 3}
    # encode and decode each clip of a batch alone (diffusers' slicing), where the class cannot take a batch
    one_clip_per_call: ClassVar[bool] = False
    default_tile: ClassVar[tuple[int, int]]  # (tile_size, tile_stride) in pixels: diffusers' defaults for the class
    options_class = DiffusersVaeOptions
    precisions = {"fp32": 1e-5, "bf16": 2e-2}
    causal = True

    def __init__(self, checkpoint: str, precision: str = "fp32", sha256: str | None = None,
                 device: torch.device | str = "cpu", tiling: TileRule | None = None, vae_config: str | None = None):
        super().__init__(device)
        if precision not in self.precisions:
            raise ConfigError(f"tokenizer.precision={precision!r} is not allowed for {self.name}; allowed: "
                              f"{', '.join(self.precisions)}")
        self.precision = precision
        self._dtype = DTYPES[precision]
        self.source = self.resolve(checkpoint, vae_config)
        self.checkpoint_sha256 = checkpoint_sha256(self.source)
        check_sha256(self.source, self.checkpoint_sha256, sha256)  # before any weights are read
        model = self.load_model(self.source)
        self.tiling = tiling
        if tiling is not None:
            enable_tiling(model, tiling, self.spatial_factor)
        self.read_constants(model)  # in float32, before the weights are cast
        # nn.Module's own cast: diffusers' override logs a warning about modules kept in float32, of which these
        # classes have none
        self._vae = torch.nn.Module.to(model, self.device, self._dtype)
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = False
            torch.backends.cudnn.deterministic = True

    # ------------------------------------------------------------------ what a subclass says

    @abstractmethod
    def read_constants(self, model: Any) -> None:
        """Keep the normalisation constants of the loaded float32 model."""

    @abstractmethod
    def normalize(self, mu: torch.Tensor) -> torch.Tensor:
        """float32 posterior mean -> the latent a trainer's model sees."""

    @abstractmethod
    def denormalize(self, latent: torch.Tensor) -> torch.Tensor:
        """The inverse of normalize, float32, as the model family's pipeline computes it before decoding."""

    @abstractmethod
    def normalization(self) -> dict[str, Any]:
        """The fingerprint's record of the normalisation: its formula and every constant."""

    def decode_model(self, z: torch.Tensor) -> torch.Tensor:
        """The decoder's output for unnormalised latents `z` in the model's dtype."""
        return self._vae.decode(z).sample

    # ------------------------------------------------------------------ checkpoints

    @classmethod
    def resolve(cls, checkpoint: str, vae_config: str | None = None) -> CheckpointSource:
        source = resolve_checkpoint(checkpoint, cls.checkpoint_advice, SINGLE_FILE)
        if source.kind == SINGLE_FILE:
            return single_file_source(source, cls.model_class, cls.name, vae_config, cls.checkpoint_advice)
        if vae_config is not None:
            raise CheckpointError(f"tokenizer.vae_config is set, but tokenizer checkpoint {source.path} is a diffusers "
                                  "folder with its own config.json; unset tokenizer.vae_config")
        return source

    @classmethod
    def load_model(cls, source: CheckpointSource) -> Any:
        """diffusers' `model_class` holding exactly the checkpoint's tensors in float32, in eval mode."""
        model_class = getattr(diffusers, cls.model_class)
        config, config_file = cls.read_config(source)
        found = config.get("_class_name")
        if found != cls.model_class:
            raise CheckpointError(f"{config_file} is a {found} folder, not {cls.model_class} (the "
                                  f"{cls.family} VAE); {cls.checkpoint_advice}")
        wrong = {k: config.get(k) for k, v in cls.required_config.items() if config.get(k, v) != v}
        if wrong:
            raise CheckpointError(f"{config_file} is not the {cls.family} VAE architecture: it has "
                                  f"{wrong}, expected { {k: cls.required_config[k] for k in wrong} }")
        with torch.device("meta"):
            model = model_class.from_config(config)
        cls.check_model_geometry(config_file, model)
        state, shown_as = cls.read_state(source)
        check_keys(source, state, model.state_dict(), shown_as, cls.family)
        model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True, assign=True)
        # the whole clip at once: diffusers' frame-wise tiles (on by default for HunyuanVideo beyond 16 frames)
        # and spatial tiles blend overlapping encodes, another function (spatial tiles only when configured)
        model.use_tiling = False
        model.use_slicing = cls.one_clip_per_call
        model.use_framewise_encoding = model.use_framewise_decoding = False
        return model.eval().requires_grad_(False)

    @classmethod
    def read_config(cls, source: CheckpointSource) -> tuple[dict[str, Any], Path]:
        """The diffusers config of the source's model, and the config.json it comes from."""
        folder = config_folder(source, cls.model_class)
        return getattr(diffusers, cls.model_class).load_config(folder), folder / "config.json"

    @classmethod
    def read_state(cls, source: CheckpointSource) -> tuple[dict[str, torch.Tensor], Callable[[str], str]]:
        """The source's tensors under diffusers' keys, and how to name such a key as the file names it."""
        if source.kind == SINGLE_FILE:
            return read_single_file_vae(source, cls.model_class), str
        return read_weight_files(source.weight_files), str

    @classmethod
    def check_model_geometry(cls, config_file: Path, model: Any) -> None:
        """Refuse a config whose model (still on the meta device) does not map a probe clip to this tokenizer's
        latent shape. Measured, not read: the compression attributes diffusers derives are not every class's."""
        clip = (1 + 2 * cls.temporal_factor, 2 * cls.spatial_factor, 3 * cls.spatial_factor)
        with torch.no_grad():
            found = tuple(model.encode(torch.empty(1, 3, *clip, device="meta")).latent_dist.mode().shape[1:])
        wanted = cls.latent_shape(*clip)
        if found != wanted:
            raise CheckpointError(
                f"{config_file} describes a VAE that encodes a clip of {clip[0]}x{clip[1]}x{clip[2]} "
                f"(frames x height x width) to a latent of {list(found)}; {cls.name} ({cls.latent_channels} channels, "
                f"{cls.temporal_factor}x{cls.spatial_factor}x{cls.spatial_factor}) makes {list(wanted)}"
            )

    @classmethod
    def check_settings(cls, cfg: TokenizerConfig) -> None:
        super().check_settings(cfg)
        if not cfg.checkpoint:
            raise ConfigError(f"tokenizer.checkpoint is required for {cls.name}; {cls.checkpoint_advice}")
        cls.configured_tiling(cfg)

    @classmethod
    def configured_tiling(cls, cfg: TokenizerConfig) -> TileRule | None:
        options = vae_options(cfg)
        return tile_rule(options.tiling, options.tile_size, options.tile_stride, cls.default_tile,
                         cls.spatial_factor, getattr(diffusers, cls.model_class))

    @classmethod
    def preflight(cls, cfg: TokenizerConfig, device: str = "cpu") -> None:
        check_cpu_bf16(cfg.precision, device, vae_options(cfg).allow_slow_cpu_bf16)
        source = cls.resolve(cfg.checkpoint, vae_options(cfg).vae_config)
        check_sha256(source, checkpoint_sha256(source), cfg.sha256)
        cls.load_model(source)  # every key, shape and tensor readable; freed on return

    @classmethod
    def checkpoint_digest(cls, checkpoint: str | None) -> str | None:
        return None if not checkpoint else checkpoint_sha256(cls.resolve(checkpoint))

    @classmethod
    def from_config(cls, cfg: TokenizerConfig, device: torch.device | str) -> DiffusersVaeTokenizer:
        cls.check_settings(cfg)
        return cls(cfg.checkpoint, cfg.precision, cfg.sha256, device, cls.configured_tiling(cfg),
                   vae_options(cfg).vae_config)

    # ------------------------------------------------------------------ encode, decode, fingerprint

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        if video.ndim != 5 or video.shape[1] != 3:
            raise ConfigError(f"{self.name} encodes [B,3,T,H,W] video in [-1,1]; got shape {list(video.shape)}")
        self.check_geometry(video.shape[2], video.shape[3], video.shape[4])
        with torch.inference_mode(), tf32_off():
            mu = self._vae.encode(video.to(self.device, self._dtype)).latent_dist.mode()
            return self.normalize(mu.float())

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.ndim != 5 or latent.shape[1] != self.latent_channels:
            raise ConfigError(f"{self.name} decodes [B,{self.latent_channels},T',H',W'] latents; got shape "
                              f"{list(latent.shape)}")
        with torch.inference_mode(), tf32_off():
            z = self.denormalize(latent.to(self.device, torch.float32)).to(self._dtype)
            return self.decode_model(z).float().clamp_(-1, 1)  # the pipelines' postprocess clamps

    def fingerprint(self) -> dict[str, Any]:
        config = {k: v for k, v in self._vae.config.items() if not k.startswith("_")}
        return {
            "name": self.name,
            "version": 1,
            "checkpoint_sha256": self.checkpoint_sha256,
            "checkpoint_format": self.source.kind,
            "precision": self.precision,
            "model_class": self.model_class,
            "latent_channels": self.latent_channels,
            "temporal_factor": self.temporal_factor,
            "spatial_factor": self.spatial_factor,
            "tiling": WHOLE_CLIP if self.tiling is None else self.tiling.record(self.spatial_factor),
            **self.normalization(),
            "architecture": json.loads(json.dumps(config)),
            "diffusers_version": diffusers.__version__,
        }
