"""A writer thread for staged units, so the encoder goes on with the next unit while one is written.

At most one unit waits behind the one being written; a write error is raised to the encoder thread at its
next hand-off or at close(), never lost.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Callable

from ..pipeline.unit import StagedPayload, stage_now


class StagingWriter:
    def __init__(self, build_dir: Path, on_staged: Callable[[StagedPayload, float], None], staging_url: str = ""):
        self._write = stage_now(build_dir, staging_url)
        self._on_staged = on_staged
        self._jobs: queue.Queue[StagedPayload | None] = queue.Queue(maxsize=1)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="staging-writer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while (payload := self._jobs.get()) is not None:
            if self._error is not None:
                continue  # drain: the encoder thread learns of the first error and stops
            try:
                started = time.perf_counter()
                self._write(payload)
                self._on_staged(payload, time.perf_counter() - started)
            except BaseException as error:  # noqa: BLE001 - handed to the encoder thread as is
                self._error = error

    def _raise_pending(self) -> None:
        if self._error is not None:
            raise self._error

    def __call__(self, payload: StagedPayload) -> None:
        self._raise_pending()
        self._jobs.put(payload)

    @property
    def pending(self) -> int:
        """Staged units handed over and not yet written."""
        return self._jobs.qsize()

    def close(self) -> None:
        """Wait for every handed-off unit to be written; raise the first write error."""
        self._jobs.put(None)
        self._thread.join()
        self._raise_pending()
