"""Reading a cache's objects by path relative to its root, from a local folder or any fsspec URL."""

from __future__ import annotations

from typing import Any, BinaryIO

from ...errors import ConfigError


class CacheStore:
    def __init__(self, url: str, storage_options: dict[str, Any]):
        import fsspec

        try:
            # a fresh instance: a cached one may come from a parent process (s3fs's event loop is not fork-safe)
            self.fs, root = fsspec.core.url_to_fs(url, skip_instance_cache=True, **storage_options)
        except (ValueError, ImportError) as error:
            raise ConfigError(f"{url}: no usable fsspec backend ({error}); install the package fsspec names") from error
        self.url, self.root = url, root.rstrip("/")

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self._path(rel)))

    def read(self, rel: str) -> bytes:
        return bytes(self.fs.cat_file(self._path(rel)))

    def open(self, rel: str) -> BinaryIO:
        return self.fs.open(self._path(rel), "rb")

    def list_files(self) -> dict[str, int]:
        """{relative path: size} of every object under the root."""
        found = self.fs.find(self.root, detail=True)
        prefix = self.fs._strip_protocol(self.root).rstrip("/") + "/"
        return {str(path)[len(prefix):]: int(info.get("size") or 0) for path, info in found.items()
                if str(path).startswith(prefix)}
