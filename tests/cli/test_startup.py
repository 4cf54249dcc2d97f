"""The command line starts without torch: building the parser of every verb imports no model library, so verbs
that need none (inspect, query, publish, fetch, verify without --deep) answer in a fraction of a second."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.exec_world import cli_env

HEAVY = ("torch", "transformers", "diffusers")


def test_the_parser_of_every_verb_imports_no_model_library():
    probe = ("import sys; from latentforge.cli.main import make_parser; make_parser(); "
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], env=cli_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize("verb", ["inspect", "verify"])
def test_a_verb_that_reads_records_imports_no_model_library(verb, tmp_path):
    probe = ("import sys; from latentforge.cli.main import main; code = main([sys.argv[1], sys.argv[2]]); "
             f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe, verb, str(tmp_path / "nothing")], env=cli_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "1 []", done.stdout + done.stderr
