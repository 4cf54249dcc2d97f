"""Is a location an fsspec URL (s3://, gs://, file://, ...) or a local path: the one test every module uses."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from .errors import ConfigError

URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # what fsspec takes as a URL


def is_url(location: str | os.PathLike[str]) -> bool:
    """A str that names a scheme; a Path is always local (Path('s3://b') would already have lost a slash)."""
    return isinstance(location, str) and bool(URL.match(location))


def local_folder(location: str, what: str) -> str:
    """`location` as a local path: a path as given, a file:// URL as the path it names; ConfigError for any other URL
    (`what` says which argument wants a local folder)."""
    if not is_url(location):
        return location
    parts = urlsplit(location)
    if parts.scheme == "file" and parts.netloc in ("", "localhost"):
        return unquote(parts.path)
    raise ConfigError(f"{what} {location!r} is a URL; it must be a local folder (a path, or a file:// URL)")
