"""One type for a place that holds files: a local folder or any fsspec URL (s3://, gs://, file://, memory://),
addressed by POSIX paths relative to it. A cache root at a URL, staged units in object storage, a WebDataset cache
read for training and a publish destination all open their files through it, so the backend is set up, and its
absence explained, in one place."""

from __future__ import annotations

from typing import Any, BinaryIO

from .errors import ConfigError


class Storage:
    """The files under `location`; `what` names the setting it came from in error messages ("output.staging_url=")."""

    def __init__(self, location: str, storage_options: dict[str, Any] | None = None, what: str = ""):
        import fsspec

        try:  # a fresh instance: a cached one may come from a parent process (s3fs's event loop is not fork-safe)
            self.fs, root = fsspec.core.url_to_fs(location, skip_instance_cache=True, **(storage_options or {}))
        except (ValueError, ImportError) as error:
            raise ConfigError(f"{what}{location!r}: no usable fsspec backend ({error}); install the package fsspec "
                              "names") from error
        self.location, self.root = location, root.rstrip("/")

    def path(self, rel: str = "") -> str:
        """The backend's path of `rel` (the root itself for "")."""
        return f"{self.root}/{rel}" if rel else self.root

    def exists(self, rel: str = "") -> bool:
        return bool(self.fs.exists(self.path(rel)))

    def read(self, rel: str) -> bytes:
        return bytes(self.fs.cat_file(self.path(rel)))

    def write(self, rel: str, data: bytes) -> None:
        """One object holding `data` (whole or not at all on object stores)."""
        self.fs.pipe_file(self.path(rel), data)

    def open(self, rel: str) -> BinaryIO:
        return self.fs.open(self.path(rel), "rb")

    def size(self, rel: str) -> int | None:
        """The file's size; None when there is no file at `rel`."""
        try:
            info = self.fs.info(self.path(rel))
        except FileNotFoundError:
            return None
        return int(info["size"]) if info.get("type") == "file" else None

    def delete(self, rel: str) -> None:
        if self.fs.exists(self.path(rel)):
            self.fs.rm_file(self.path(rel))

    def list_files(self) -> dict[str, int]:
        """{relative path: size} of every file under the root, listed afresh ({} when nothing is there)."""
        self.fs.invalidate_cache()
        if not self.fs.exists(self.root):
            return {}
        prefix = self.fs._strip_protocol(self.root).rstrip("/") + "/"
        return {str(path)[len(prefix):]: int(info.get("size") or 0)
                for path, info in self.fs.find(self.root, detail=True).items() if str(path).startswith(prefix)}
