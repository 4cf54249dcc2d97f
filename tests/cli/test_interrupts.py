"""A Ctrl-C or SIGTERM ends every verb with the resume line and 128+N, wherever it lands: in a verb, while the
verbs are imported, or inside Python's own machinery whose clean-up then fails with an error of its own."""

from __future__ import annotations

import signal

import pytest

from latentforge.cli import inspect as inspect_verb
from latentforge.cli import main as cli_main
from latentforge.errors import StopRequested


def _raising(error: BaseException):
    def run(args) -> int:
        raise error
    return run


def _cleanup_failed_while_handling(first: BaseException) -> RuntimeError:
    """What an interrupted thread join or lock leaves: its clean-up raised while `first` propagated."""
    try:
        try:
            raise first
        finally:
            raise RuntimeError("release unlocked lock")
    except RuntimeError as error:
        return error


@pytest.mark.parametrize("debug", [[], ["--debug"]])
def test_an_error_raised_while_a_ctrl_c_unwinds_is_the_ctrl_c(monkeypatch, capsys, debug):
    monkeypatch.setattr(inspect_verb, "run", _raising(_cleanup_failed_while_handling(KeyboardInterrupt())))
    assert cli_main.main([*debug, "inspect", "somewhere"]) == 130
    err = capsys.readouterr().err
    assert "interrupted; rerun the same command to resume:" in err and "unexpected" not in err, err


def test_an_error_raised_while_a_sigterm_stop_unwinds_is_the_stop(monkeypatch, capsys):
    stop = StopRequested(signal.SIGTERM)
    monkeypatch.setattr(inspect_verb, "run", _raising(_cleanup_failed_while_handling(stop)))
    assert cli_main.main(["inspect", "somewhere"]) == 143
    err = capsys.readouterr().err
    assert "stopped by SIGTERM; staged work is kept. Resume with:" in err and "unexpected" not in err, err


def test_a_ctrl_c_while_the_verbs_are_imported_prints_the_resume_line(monkeypatch, capsys):
    def interrupted_import():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "make_parser", interrupted_import)
    assert cli_main.main(["inspect", "somewhere"]) == 130
    assert "interrupted; rerun the same command to resume:" in capsys.readouterr().err


def test_an_error_with_no_interrupt_behind_it_is_still_reported(monkeypatch, capsys):
    monkeypatch.setattr(inspect_verb, "run", _raising(_cleanup_failed_while_handling(ValueError("a bad value"))))
    assert cli_main.main(["inspect", "somewhere"]) == 1
    assert "unexpected RuntimeError: release unlocked lock" in capsys.readouterr().err
    with pytest.raises(RuntimeError):
        cli_main.main(["--debug", "inspect", "somewhere"])


def test_ctrl_c_in_a_command_is_a_keyboard_interrupt_subclass_and_the_handler_is_restored(monkeypatch, capsys):
    """Python's own KeyboardInterrupt class can make the interpreter end by SIGINT after main() caught it."""
    seen = []

    def run(args) -> int:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt as interrupt:
            seen.append(type(interrupt))
            raise
        return 0

    monkeypatch.setattr(inspect_verb, "run", run)
    assert cli_main.main(["inspect", "somewhere"]) == 130
    assert seen and seen[0] is not KeyboardInterrupt and issubclass(seen[0], KeyboardInterrupt)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert "interrupted; rerun the same command to resume:" in capsys.readouterr().err
