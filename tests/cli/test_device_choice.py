"""The verbs that decode or encode (`verify --deep`, `preview`, `cosmos t5`) default to `--device auto`: the
first GPU when torch sees one, else the CPU; a device named on the command line wins. The choice is tested with
the availability given; the line each verb prints naming its choice is checked where the verb is run without
--device (tests/report/test_preview.py, tests/cli/test_first_hour.py, tests/integrations/test_cosmos_tools.py)."""

from __future__ import annotations

import pytest

from latentforge.cli.main import make_parser
from latentforge.devices import AUTO, choose_device

NO_GPU = "torch sees no CUDA GPU"


def never_asked() -> str | None:
    raise AssertionError("a named device needs no look at the GPUs")


def test_auto_takes_the_gpu_when_there_is_one_else_the_cpu():
    assert choose_device(AUTO, lambda: None) == "cuda"
    assert choose_device(None, lambda: None) == "cuda"
    assert choose_device(AUTO, lambda: NO_GPU) == "cpu"


@pytest.mark.parametrize("named", ["cpu", "cuda", "cuda:1"])
def test_a_named_device_wins(named):
    assert choose_device(named, never_asked) == named  # --device cpu on a GPU host stays on the CPU


@pytest.mark.parametrize("argv", [["verify", "ROOT", "--deep"], ["preview", "ROOT"],
                                  ["cosmos", "t5", "DATA", "--t5", "MODEL"]])
def test_the_verbs_default_to_auto(argv):
    assert make_parser().parse_args(argv).device == AUTO

