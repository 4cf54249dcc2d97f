"""Pre-flight: every check that needs this machine but no sample, run before anything is written under the
output root. The output root (a folder latentforge may write: empty, or a cache of its own, never the dataset), the
devices and packages the executor needs, and every model file (read and hashed) are checked here, so a wrong path,
hash or device fails in seconds instead of after the probe, and leaves no records that would make the corrected
command look like a different build."""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path

from .. import registry
from ..cache.ownership import check_not_inside, check_root_is_ours, fixed_prefix
from ..cache.root import CacheRoot
from ..conditioning.clip_embedding import ClipImageEmbedder
from ..config import BuildConfig
from ..devices import cpu_build_notice
from ..errors import ConfigError, InputNotice, StorageError, environment_message
from ..executor.base import Executor
from ..executor.metrics import check_port_free
from .records_dir import records_in_root


def check_output_root(root: Path, key: str = "output.root") -> None:
    """The root is a folder, or can be created as one where its nearest existing ancestor is a writable folder."""
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{key}={str(root)!r} is a file, not a folder; give a folder with --out")
    ancestor = root.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"{key}={str(root)!r} cannot be created: {ancestor} is a file; give a folder "
                          "with --out")
    if not os.access(ancestor, os.W_OK | os.X_OK):  # a fault of the machine, like a full disk: exit 1
        raise StorageError(environment_message(OSError(errno.EACCES, os.strerror(errno.EACCES), str(ancestor))))


def check_root_ownership(config: BuildConfig, build_dir: Path) -> None:
    """The output root is empty or a cache latentforge made there with nothing else in it, and it does not hold the
    dataset: otherwise ConfigError, before anything is written."""
    root = CacheRoot.of(config.output.root)
    if not root.is_url:
        check_not_inside(Path(root.location), [fixed_prefix(p) for p in config.dataset.path])
    layout = registry.resolve("sink", config.output.sink).root_layout
    check_root_is_ours(root, layout, build_dir)


def preflight(config: BuildConfig, executor: Executor) -> None:
    if records_in_root(config):
        check_output_root(Path(config.output.root))
    else:  # the root is the sink's; records stay local
        check_output_root(executor.build_dir.parent, "output.staging_dir")
    check_root_ownership(config, executor.build_dir)
    if config.run.metrics_port:
        check_port_free(config.run.metrics_host, config.run.metrics_port, "the build's main process")
    executor.preflight()  # its ranks' ports where they run on this machine
    # the device the ranks encode on: run.gpus wins over run.device
    registry.resolve("tokenizer", config.tokenizer.name).preflight(config.tokenizer, executor.main_device())
    notice = cpu_build_notice(str(executor.main_device()))
    if notice is not None:
        warnings.warn(notice, InputNotice, stacklevel=2)
    if config.text.name != "none":
        registry.resolve("text", config.text.name).preflight(config.text)
    conditioning = config.conditioning
    if conditioning.image_embeds != "none":
        registry.resolve("image_encoder", conditioning.image_embeds).preflight(
            conditioning.image_encoder_path, conditioning.image_encoder_sha256)
    if config.captions.mode != "keep":  # the captioner's folder: its architecture, files and pinned SHA-256
        registry.resolve("captioner", config.captions.name).preflight(config.captions)
    if config.dedup.enabled:  # the CLIP checkpoint of the near-duplicate pass: its route and pinned SHA-256
        ClipImageEmbedder.preflight(config.dedup.model, config.dedup.sha256)
    if config.segments.detect == "transnetv2":  # its weights: the file, its pinned SHA-256, exactly its tensors
        from ..decode.transnetv2_weights import check_weights

        check_weights(config.segments.transnetv2_weights, config.segments.transnetv2_sha256)
