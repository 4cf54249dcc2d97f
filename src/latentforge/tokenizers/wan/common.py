"""What the Wan2.1 and Wan2.2 tokenizers share: the bf16 fast path's settings (how its convolution kernels are
chosen, checked and made reproducible) and its construction over a VAE's weights, the official causal chunk loop,
and WanTokenizer, their settings checks and pre-flight written once."""

from __future__ import annotations

import os
from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from ...config import TokenizerConfig
from ...config.option_roles import EXECUTION, LOCATION, PERMISSION, option
from ...errors import ConfigError
from ..base import Tokenizer
from ..checkpoints import CheckpointSource, check_sha256, checkpoint_sha256
from ..cpu_bf16 import check_cpu_bf16
from ..kernel_planning import KernelPlanning
from ..kernels.carried_books import read_carried_plans
from ..kernels.families import plans_key
from ..kernels.plan_book import PlanBook
from ..kernels.planned_convs import PlannedConvs
from ..kernels.shared_books import shared_plan_book, shipped_book
from .fast_encoder import FastWanEncoder
from .plan_signatures import traced_signatures
from .wan21_checkpoint import resolve_checkpoint

if TYPE_CHECKING:  # what the Cosmos tokenizers use of this module needs no diffusers
    from diffusers import AutoencoderKLWan

CONV_KERNELS = ("plans", "heuristics")  # tokenizer.conv_kernels of the bf16 fast path on CUDA
OFFICIAL_WINDOW = 4  # frames per causal chunk after frame 0 in official Wan and diffusers
HEURISTICS_MODE_B_ENV = "TORCH_CUDNN_USE_HEURISTIC_MODE_B"


@dataclass(frozen=True)
class WanOptions:
    """The Wan tokenizers' own keys (tokenizer.KEY), with their defaults."""

    # Frames per causal chunk of the cosmos-bf16 loop (Cosmos' video2world uses 16). The maths is the same for
    # any window, but on a GPU the convolution kernels (and so the last bits) depend on it. fp32 always runs the
    # official chunking (4), so it equals the official Wan module.
    temporal_window: int = option(OFFICIAL_WINDOW, EXECUTION)
    max_gpu_mem_gib: float = option(24.0, EXECUTION)  # the bf16 fast path picks its causal window to stay under this
    # bf16 fast path: let cuDNN time its kernels instead of taking its heuristics' choice. Faster, but the timing
    # race picks kernels per process, so the same input can give other bits in another process, rank or resume;
    # off by default (docs/tokenizers.md).
    cudnn_benchmark: bool = option(False, EXECUTION, autotunes=True)
    # bf16 fast path on CUDA, how each convolution's kernel is chosen: "plans" times cuDNN's candidate plans once
    # per build and shape, records the winners in the build and replays them in every rank, resume and deep
    # verify (needs nvidia-cudnn-frontend); "heuristics" takes cuDNN's heuristics through PyTorch.
    conv_kernels: str = option("plans", EXECUTION)
    # where builds share recorded plans, one book per GPU model and cuDNN (None: ~/.cache/latentforge/conv-plans)
    conv_plans_dir: str | None = option(None, LOCATION)
    # bf16 or cosmos-bf16 on a CPU without bf16 instructions runs ~55x slower than fp32; the pre-flight refuses it
    # unless this is set (tokenizers/cpu_bf16.py)
    allow_slow_cpu_bf16: bool = option(False, PERMISSION)
    # a plan book carried from another machine (its ROOT/build/conv_plans/<digest>.json, or a cache's
    # cache_config.json), asked before conv_plans_dir: the same GPU model and software then run the same plans
    conv_plans_file: str | None = option(None, LOCATION)


def wan_options(cfg: TokenizerConfig) -> WanOptions:
    """cfg's Wan keys; their defaults for a TokenizerConfig made without them (options=NoOptions())."""
    return cfg.options if isinstance(cfg.options, WanOptions) else WanOptions()


def prefer_heuristics_mode_b() -> None:
    """Ask PyTorch to take cuDNN's heuristics in mode B for this process, unless the user chose a mode.

    Mode B looks at more of the problem than the default mode A and picks faster kernels for the fast path's
    convolutions (0.51 instead of 0.60 s per 93x480x832 clip on an H200, docs/benchmarks/fast-encoder.md); like
    mode A it is a function of the shapes, the GPU model and the software, so every process picks the same kernels.
    PyTorch reads the variable at its first convolution, so this runs before the model is loaded. Not for fp32 and
    cosmos-bf16: they must pick the kernels official Wan and Cosmos' wrapper pick in their own processes (mode A).
    """
    os.environ.setdefault(HEURISTICS_MODE_B_ENV, "1")


def fast_path_environment(cfg: TokenizerConfig, device: str) -> dict[str, str]:
    """What prepare_fast_path sets in an encoder process: heuristics mode B for the bf16 fast path on CUDA."""
    return {HEURISTICS_MODE_B_ENV: "1"} if cfg.precision == "bf16" and torch.device(device).type == "cuda" else {}


def require_cudnn_frontend() -> None:
    """ConfigError with the fix when the cuDNN frontend that runs recorded plans is not importable."""
    try:
        import cudnn  # noqa: F401
    except Exception as error:  # noqa: BLE001 - absent, or built for another CUDA: the same fix
        raise ConfigError(
            f"tokenizer.conv_kernels=plans needs the cuDNN frontend, which does not import here ({error}); "
            "pip install 'latentforge[gpu]' (nvidia-cudnn-frontend), or --set tokenizer.conv_kernels=heuristics"
        ) from None


def runs_recorded_plans(cfg: TokenizerConfig, device: str) -> bool:
    """Will the bf16 fast path run recorded cuDNN plans on `device`?"""
    return cfg.precision == "bf16" and wan_options(cfg).conv_kernels == "plans" and device.startswith("cuda")


def check_fast_path_packages(cfg: TokenizerConfig, device: str) -> None:
    """The pre-flight's part for the fast path: the cuDNN frontend where recorded plans will run, and a readable
    carried plan book (tokenizer.conv_plans_file) where one is named."""
    if runs_recorded_plans(cfg, device):
        require_cudnn_frontend()
        if wan_options(cfg).conv_plans_file:
            read_carried_plans(wan_options(cfg).conv_plans_file)


def deterministic_cudnn(device: torch.device) -> None:
    """On CUDA, cuDNN's deterministic algorithms and no timing race for PyTorch's own convolutions."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def check_conv_kernels(cfg: TokenizerConfig) -> None:
    """The bf16 fast path's kernel settings: a known tokenizer.conv_kernels, not both recorded plans and timing."""
    options = wan_options(cfg)
    if options.conv_kernels not in CONV_KERNELS:
        raise ConfigError(f"tokenizer.conv_kernels={options.conv_kernels!r}; allowed: {', '.join(CONV_KERNELS)}")
    if cfg.precision == "bf16" and options.conv_kernels == "plans" and options.cudnn_benchmark:
        raise ConfigError("tokenizer.cudnn_benchmark=true with tokenizer.conv_kernels=plans: recorded plans "
                          "replace autotuning; set one of them (cudnn_benchmark=false, or conv_kernels=heuristics)")


def prepare_fast_path(device: torch.device | str, conv_kernels: str) -> bool:
    """Before the model loads: heuristics mode B on CUDA, the cuDNN frontend checked where recorded plans will
    run; whether they will (conv_kernels "plans" on CUDA)."""
    on_gpu = torch.device(device).type == "cuda"
    if on_gpu:
        prefer_heuristics_mode_b()
    planned = conv_kernels == "plans" and on_gpu
    if planned:
        require_cudnn_frontend()
    return planned


def fast_encoder(vae: AutoencoderKLWan, device: torch.device, max_gpu_mem_gib: float, cudnn_benchmark: bool,
                 planned: bool, conv_plans_dir: str | None) -> FastWanEncoder:
    """The bf16 fast path over the VAE's encoder weights: the window chosen per clip from max_gpu_mem_gib, every
    convolution by a plan from the machine's shared book (planned) or by PyTorch's call."""
    return FastWanEncoder(
        vae.encoder, vae.quant_conv, torch.bfloat16, window=None,
        max_gib=max_gpu_mem_gib, cudnn_benchmark=cudnn_benchmark and device.type == "cuda",
        convs=PlannedConvs(shared_plan_book(device, conv_plans_dir)) if planned else None,
    )


def record_fast_plans(fast: FastWanEncoder | None, entries: dict[str, str], replay_only: bool,
                      beneath: dict[str, str] | None) -> None:
    """KernelPlanning.record_plans for a fast path that runs recorded plans; nothing otherwise."""
    if fast is not None and isinstance(fast.convs, PlannedConvs):
        parent = None if replay_only else fast.convs.book
        if beneath and not replay_only:
            parent = PlanBook(entries=beneath, parent=parent)
        fast.convs = PlannedConvs(PlanBook(entries=entries, parent=parent, replay_only=replay_only))


def fast_plans(fast: FastWanEncoder | None) -> dict[str, str]:
    """KernelPlanning.recorded_plans of the fast path: its top book's entries ({} without recorded plans)."""
    return fast.convs.book.entries() if fast is not None and isinstance(fast.convs, PlannedConvs) else {}


def encode_mu(vae: AutoencoderKLWan, video: torch.Tensor, temporal_window: int) -> torch.Tensor:
    """The posterior mean mu [B,16,T',H',W'] in the model's dtype, chunked as Cosmos' `VAE_.encode`."""
    frames = video.shape[2]
    chunks = [video[:, :, :1]] + [video[:, :, s : s + temporal_window] for s in range(1, frames, temporal_window)]
    vae.clear_cache()
    outputs = []
    for chunk in chunks:
        vae._enc_conv_idx = [0]
        outputs.append(vae.encoder(chunk, feat_cache=vae._enc_feat_map, feat_idx=vae._enc_conv_idx))
    moments = vae.quant_conv(torch.cat(outputs, dim=2))
    vae.clear_cache()
    return moments.chunk(2, dim=1)[0]


class WanTokenizer(KernelPlanning, Tokenizer):
    """A Wan VAE tokenizer's class methods, the same for Wan2.1 and Wan2.2 but for what each subclass names: the
    error for a missing checkpoint, the advice for a local file it cannot use, and its checkpoint loader."""

    options_class = WanOptions
    code_path_keys = frozenset({"encoder_path"})  # the fast encoder or the chunk loop
    carried_plans_key = "conv_plans_file"
    without_plans = "conv_kernels=heuristics"
    missing_checkpoint: ClassVar[str]  # the ConfigError's message when tokenizer.checkpoint is not set
    checkpoint_advice: ClassVar[str]  # resolve_checkpoint's advice for a local file it cannot use
    _fast: FastWanEncoder | None  # the bf16 fast path, None in the other modes

    @staticmethod
    @abstractmethod
    def load_model(source: CheckpointSource, dtype: torch.dtype) -> AutoencoderKLWan:
        """Every key, shape and tensor of `source` read into the VAE, in `dtype`."""

    @staticmethod
    @abstractmethod
    def released_architecture() -> AutoencoderKLWan:
        """The VAE at its released widths, weights not filled (made on the device in use: meta when traced)."""

    @staticmethod
    def fast_input(video: torch.Tensor) -> torch.Tensor:
        """[B,3,T,H,W] video as the fast encoder takes it."""
        return video

    @classmethod
    def plan_signatures(cls, cfg: TokenizerConfig, shapes: list[tuple[int, int, int, int]]) -> set[str]:
        """The convolution signatures whose kernel plans a build with `cfg` records for tokenizer calls of `shapes`
        ((batch, frames, height, width)), found on the CPU (plan_signatures.py); none where no plans are recorded."""
        if not runs_recorded_plans(cfg, "cuda"):
            return set()
        return traced_signatures(cls.released_architecture, cls.fast_input, shapes, wan_options(cfg).max_gpu_mem_gib)

    @classmethod
    def check_settings(cls, cfg: TokenizerConfig) -> None:
        super().check_settings(cfg)
        check_conv_kernels(cfg)
        if not cfg.checkpoint:
            raise ConfigError(cls.missing_checkpoint)

    @classmethod
    def process_environment(cls, cfg: TokenizerConfig, device: str) -> dict[str, str]:
        return fast_path_environment(cfg, device)

    @classmethod
    def preflight(cls, cfg: TokenizerConfig, device: str = "cpu") -> None:
        check_cpu_bf16(cfg.precision, device, wan_options(cfg).allow_slow_cpu_bf16)  # before the model loads
        check_fast_path_packages(cfg, device)
        source = resolve_checkpoint(cfg.checkpoint, cls.checkpoint_advice)
        check_sha256(source, checkpoint_sha256(source), cfg.sha256)
        cls.load_model(source, torch.float32)  # every key, shape and tensor readable; freed on return

    @classmethod
    def checkpoint_digest(cls, checkpoint: str | None) -> str | None:
        return None if not checkpoint else checkpoint_sha256(resolve_checkpoint(checkpoint, cls.checkpoint_advice))

    @classmethod
    def records_plans(cls, cfg: TokenizerConfig, device: str) -> bool:
        return runs_recorded_plans(cfg, device)

    @classmethod
    def carried_plans_file(cls, cfg: TokenizerConfig) -> str | None:
        return wan_options(cfg).conv_plans_file

    def record_plans(self, entries: dict[str, str], replay_only: bool = False,
                     beneath: dict[str, str] | None = None) -> None:
        record_fast_plans(self._fast, entries, replay_only, beneath)

    def recorded_plans(self) -> dict[str, str]:
        return fast_plans(self._fast)

    def shipped_plans(self) -> dict[str, str]:
        recorded = self._fast is not None and isinstance(self._fast.convs, PlannedConvs)
        return shipped_book(plans_key(self.device)).entries() if recorded else {}
