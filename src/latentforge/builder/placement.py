"""The executor a build runs its units through: run.executor, made by name from the registry."""

from __future__ import annotations

from pathlib import Path

from .. import registry
from ..config import BuildConfig
from ..executor.base import Executor


def executor_for(config: BuildConfig, build_dir: Path, quiet: bool = False) -> Executor:
    return registry.resolve("executor", config.run.executor)(config, build_dir, quiet)
