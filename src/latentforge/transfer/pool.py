"""Run one function over many items on a thread pool; the first failure, or Ctrl-C, stops what has not started."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Callable, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def run_parallel(function: Callable[[Item], Result], items: Sequence[Item], workers: int) -> list[Result]:
    """Results in the order of `items`. Threads suit this work: hashlib and socket I/O release the GIL.

    Objects already in flight finish (a half-sent object is never visible); queued ones never start."""
    if not items:
        return []
    # A worker takes the next item the moment its own fails, before the pool's queue is cancelled: it must not start.
    failing = threading.Event()

    def run(item: Item) -> Result | None:
        if failing.is_set():
            return None
        try:
            return function(item)
        except BaseException:
            failing.set()
            raise

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(items)))) as pool:
        futures: list[Future[Result | None]] = [pool.submit(run, item) for item in items]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        except BaseException:
            failing.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        failed = [future for future in futures if future in done and future.exception() is not None]
        if failed:
            pool.shutdown(wait=False, cancel_futures=True)
            raise failed[0].exception()  # type: ignore[misc]
        return [future.result() for future in futures]  # none is None: nothing failed
