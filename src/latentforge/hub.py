"""Hugging Face hub ids (`org/name`) given where a local model folder is expected."""

from __future__ import annotations

import re
from pathlib import Path

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def looks_like_hub_id(value: str) -> bool:
    """`org/name` that is not an existing local path."""
    return bool(HUB_ID.match(value)) and not Path(value).expanduser().exists()


def cached_snapshot(repo_id: str) -> Path | None:
    """The folder of `repo_id`'s snapshot in the local hub cache (HF_HOME / HF_HUB_CACHE), without any network
    access; None when it was never downloaded."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


def hub_cache_folder() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)
