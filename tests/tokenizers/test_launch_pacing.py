"""The host stays at most `lead` windows ahead of the device, sleeping on the oldest window's event."""

from __future__ import annotations

import pytest
import torch

from latentforge.tokenizers.kernels.launch_pacing import LaunchPacer


class FakeEvent:
    """A window's completion as the device would report it: done once the test says so, or once waited for."""

    def __init__(self, log: list[str], name: str, done: bool):
        self.log, self.name, self.done = log, name, done

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.log.append(f"wait {self.name}")
        self.done = True


def test_host_waits_for_the_oldest_window_once_lead_windows_are_queued():
    log: list[str] = []
    finished = {"w0"}  # the device already finished window 0 when the host got to window 2
    counter = iter(range(100))

    def record(device):
        name = f"w{next(counter)}"
        log.append(f"launch {name}")
        return FakeEvent(log, name, name in finished)

    pacer = LaunchPacer(lead=2, record=record)
    for _ in range(5):
        pacer.queued(torch.device("cuda"))
    # w0 was done (no wait); w1 and w2 were not: the host slept on each before going past lead=2 windows ahead
    assert log == ["launch w0", "launch w1", "launch w2", "launch w3", "wait w1", "launch w4", "wait w2"]
    assert pacer.waits == 2


def test_cpu_runs_in_order_and_records_nothing():
    pacer = LaunchPacer(record=lambda device: pytest.fail("no events on the CPU"))
    for _ in range(3):
        pacer.queued(torch.device("cpu"))
    assert pacer.waits == 0


def test_lead_below_one_is_refused():
    with pytest.raises(ValueError, match="lead=0"):
        LaunchPacer(lead=0)
