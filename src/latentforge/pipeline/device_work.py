"""The device half of a pass that runs before any unit (the caption and near-duplicate passes).

A pass reads its records in the process that holds the build's records, hands the windows still to compute to the
executor as a DeviceWork, and records each batch's results as they come back (`Place`). The executor decides where
the work runs (Executor.run_device_work): the local executor in its own process on its main device, the Ray executor
in one task on a GPU of the cluster. So a DeviceWork pickles, and reads or writes no build record: on a cluster whose
nodes keep the build's records apart, every result still lands in the records of the process that commits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Iterator

BatchResults = dict[int, Any]  # source_index -> what the pass computed for that window (or its Reject)
Place = Callable[["DeviceWork", Callable[[BatchResults], None]], None]  # runs the work, hands on each batch


class DeviceWork(ABC):
    what: ClassVar[str] = ""  # the pass, for messages: "caption pass"

    @abstractmethod
    def batches(self, device: str) -> Iterator[BatchResults]:
        """Compute on `device`, loading the model only once a window needs it; one result per window of each batch,
        a batch at a time, so the pass records what finished before an interruption."""

