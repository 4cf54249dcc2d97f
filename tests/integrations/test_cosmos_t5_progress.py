"""`cosmos t5` reports progress per pickle written through its callback, and the verb ends by naming the folder
and the count it wrote."""

from __future__ import annotations

from collections import Counter

import pytest

from helpers.progress import ProgressRecorder
from latentforge.demo.tiny_text_model import make_tiny_t5
from latentforge.integrations.cosmos.t5_pickles import write_t5_pickles
from latentforge.text.t5 import T5TextEncoder

PROMPTS = {"clip_a": "a red ball rolls", "clip_b": "the robot arm picks up a cube", "clip_c": "a red ball rolls"}


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    return make_tiny_t5(tmp_path_factory.mktemp("t5"), d_model=64, corpus=list(PROMPTS.values()))


@pytest.fixture
def dataset(tmp_path):
    (tmp_path / "metas").mkdir()
    for stem, prompt in PROMPTS.items():
        (tmp_path / "metas" / f"{stem}.txt").write_text(prompt, encoding="utf-8")
    return tmp_path


def test_progress_counts_the_pickles_to_write(dataset, t5_folder):
    encoder = T5TextEncoder(str(t5_folder))
    (dataset / "t5_xxl").mkdir()
    (dataset / "t5_xxl" / "clip_a.pickle").write_bytes(b"kept")
    recorder = ProgressRecorder()
    totals, done, progress = recorder.totals, recorder.done, recorder
    report = write_t5_pickles(dataset, encoder, progress=progress)
    assert report.folder == dataset / "t5_xxl" and report.skipped == ["clip_a"]
    assert totals == {"encode": 2} and done == Counter(totals)


def test_cli_names_the_folder_and_count(dataset, t5_folder, cli):
    done = cli(["cosmos", "t5", str(dataset), "--t5", str(t5_folder), "--device", "cpu"])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "prompts/s" in done.stderr
    assert f"wrote 3 pickles to {dataset / 't5_xxl'} (0 already there, kept)" in done.stdout
