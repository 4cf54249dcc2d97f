"""The command line starts without torch: building the parser of every verb imports no model library, so verbs
that need none (inspect, query, publish, fetch, verify without --deep) answer in a fraction of a second."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.exec_world import cli_env
from helpers.fake_cache import write_fake_cache

HEAVY = ("torch", "transformers", "diffusers")


def test_the_parser_of_every_verb_imports_no_model_library():
    probe = ("import sys; from latentforge.cli.main import make_parser; make_parser(); "
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], env=cli_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize("verb", ["inspect", "verify"])
@pytest.mark.parametrize("what", ["cache", "nothing"])
def test_a_verb_that_reads_records_imports_no_model_library(verb, what, tmp_path):
    """On a real cache (every integrity check runs) and on a path that is none (the one-line refusal)."""
    root = write_fake_cache(tmp_path / "cache", num_samples=2, rows_per_shard=2) if what == "cache" else tmp_path / what
    probe = ("import sys; from latentforge.cli.main import main; code = main([sys.argv[1], sys.argv[2]]); "
             f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe, verb, str(root)], env=cli_env(),
                          capture_output=True, text=True, timeout=120)
    code = 0 if what == "cache" else 1
    assert done.stdout.strip().splitlines()[-1] == f"{code} []", done.stdout + done.stderr
