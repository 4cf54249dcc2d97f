"""The command line starts without torch: building the parser of every verb imports no model library, so verbs
that need none (inspect, query, publish, fetch) answer in a fraction of a second."""

from __future__ import annotations

import subprocess
import sys

from helpers.exec_world import cli_env

HEAVY = ("torch", "transformers", "diffusers")


def test_the_parser_of_every_verb_imports_no_model_library():
    probe = ("import sys; from latentforge.cli.main import make_parser; make_parser(); "
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], env=cli_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_inspect_of_a_missing_root_imports_no_model_library(tmp_path):
    probe = ("import sys; from latentforge.cli.main import main; code = main(['inspect', sys.argv[1]]); "
             f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "nothing")], env=cli_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "1 []", done.stdout + done.stderr
