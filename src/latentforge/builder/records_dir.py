"""Where a build keeps its records (plan, staged units, run.json, lock, model record, conv_plans, stats).

In ROOT/build for a sink that commits into a local folder it shares with them; in a node-local staging folder
for a sink whose root may be a URL (output.staging_dir, or one under the system temp dir named by a digest of
output.root, so rerunning the same command finds the same records and resumes)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from .. import registry
from ..cache.layout import RUN_RECORDS_DIR
from ..config import BuildConfig
from ..locations import is_url

STAGING_PARENT = "latentforge-staging"


def records_in_root(config: BuildConfig) -> bool:
    """Does the build keep its records in ROOT/build? Not when its sink's root may be a URL: the commit owns every
    object there (the one place a build asks its sink this)."""
    return not registry.resolve("sink", config.output.sink).remote_root


def default_staging_dir(root: str) -> Path:
    """SYSTEM_TEMP/latentforge-staging/<first 16 hex of the SHA-256 of the root URL (or absolute path)>."""
    key = root if is_url(root) else os.path.abspath(root)
    return Path(tempfile.gettempdir()) / STAGING_PARENT / hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def build_records_dir(config: BuildConfig) -> Path:
    output = config.output
    if records_in_root(config):
        return Path(output.root) / RUN_RECORDS_DIR
    staging = Path(output.staging_dir) if output.staging_dir else default_staging_dir(output.root)
    return staging / RUN_RECORDS_DIR
