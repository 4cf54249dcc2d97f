"""The models a build runs, loaded once per process, and the record of them that commit reads instead of
loading them again (cache/model_record.py)."""

from __future__ import annotations

from pathlib import Path

import torch

from .. import registry
from ..cache.model_record import ModelRecord, write_model_record
from ..config import BuildConfig
from ..text.base import TextEncoder
from ..tokenizers.base import Tokenizer
from ..tokenizers.kernel_planning import replay_plans
from .conditioning import ConditioningStage
from .kernel_plan_pass import DecidedPlans
from .text_stage import build_text_record


def load_models(config: BuildConfig, device: torch.device | str,
                plans: DecidedPlans | None = None) -> tuple[Tokenizer, TextEncoder | None]:
    """(tokenizer, text encoder or None) on `device`; with `plans`, the tokenizer replays the book the build's
    plan pass decided for this environment and times none of its own."""
    device = torch.device(device)
    tokenizer = registry.resolve("tokenizer", config.tokenizer.name).from_config(config.tokenizer, device)
    if plans is not None:  # after the tokenizer is made: it may set what the environment record reads
        replay_plans(tokenizer, plans.for_device(device), replay_only=True)
    text = None
    if config.text.name != "none":
        text = registry.resolve("text", config.text.name).from_config(config.text, device)
    return tokenizer, text


def model_record(config: BuildConfig, tokenizer: Tokenizer, text: TextEncoder | None,
                 device: torch.device | str, conditioning: ConditioningStage | None = None) -> ModelRecord:
    """What commit needs from the models: fingerprints, text datasets, the empty prompt's row, and the
    conditioning streams with their producers."""
    return ModelRecord(tokenizer.fingerprint(), type(tokenizer).latent_channels,
                       build_text_record(config, text, device),
                       None if conditioning is None else conditioning.section())


def record_models(build_dir: Path, config: BuildConfig, tokenizer: Tokenizer, text: TextEncoder | None,
                  device: torch.device | str, conditioning: ConditioningStage | None = None) -> None:
    write_model_record(build_dir, model_record(config, tokenizer, text, device, conditioning))
