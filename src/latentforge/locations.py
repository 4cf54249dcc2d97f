"""Is a location an fsspec URL (s3://, gs://, file://, ...) or a local path: the one test every module uses."""

from __future__ import annotations

import os
import re

URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # what fsspec takes as a URL


def is_url(location: str | os.PathLike[str]) -> bool:
    """A str that names a scheme; a Path is always local (Path('s3://b') would already have lost a slash)."""
    return isinstance(location, str) and bool(URL.match(location))
