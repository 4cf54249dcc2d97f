"""Recorded kernel plans: a book records one plan per convolution signature, never changes it, and processes that
share a book agree even when they meet a new signature at the same moment."""

import json
import multiprocessing

import pytest

from latentforge.errors import DamagedFile
from latentforge.tokenizers.kernels.plan_book import PlanBook


def test_a_choice_is_tuned_once_and_then_replayed(tmp_path):
    book = PlanBook(tmp_path / "book.json")
    tuned = []

    def tune():
        tuned.append(1)
        return "eng62_k2=0"

    assert book.choose("conv A", tune) == "eng62_k2=0"
    assert book.choose("conv A", lambda: "another plan") == "eng62_k2=0"
    assert tuned == [1]
    reopened = PlanBook(tmp_path / "book.json")  # another process, later
    assert reopened.choose("conv A", lambda: "another plan") == "eng62_k2=0"
    assert json.loads((tmp_path / "book.json").read_text()) == {"conv A": "eng62_k2=0"}


def test_a_book_asks_its_parent_and_records_the_answer(tmp_path):
    shipped = PlanBook(entries={"conv A": "eng41"})
    shared = PlanBook(tmp_path / "shared.json", parent=shipped)
    build = PlanBook(tmp_path / "build.json", parent=shared)
    assert build.choose("conv A", lambda: "tuned") == "eng41"  # from the shipped book, through the shared one
    assert build.choose("conv B", lambda: "tuned") == "tuned"  # tuned once, recorded in both files
    assert json.loads((tmp_path / "shared.json").read_text()) == {"conv A": "eng41", "conv B": "tuned"}
    assert json.loads((tmp_path / "build.json").read_text()) == {"conv A": "eng41", "conv B": "tuned"}
    # the build's own record wins over a shared book that was since deleted or changed
    (tmp_path / "shared.json").write_text(json.dumps({"conv B": "something else"}))
    resumed = PlanBook(tmp_path / "build.json", parent=PlanBook(tmp_path / "shared.json"))
    assert resumed.choose("conv B", lambda: "tuned again") == "tuned"


def test_recorded_entries_replay_in_memory_without_a_file(tmp_path):
    book = PlanBook(entries={"conv A": "eng39_k25=2"}, parent=PlanBook(tmp_path / "shared.json"))
    assert book.choose("conv A", lambda: "tuned") == "eng39_k25=2"
    assert not (tmp_path / "shared.json").exists()
    assert len(book) == 1 and book.entries() == {"conv A": "eng39_k25=2"}


def _choose_in_child(path, signatures, start, results):
    start.wait()
    book = PlanBook(path)
    results.put([book.choose(signature, lambda s=signature: f"{s} tuned by {multiprocessing.current_process().name}")
                 for signature in signatures])


def test_processes_meeting_new_signatures_at_once_agree(tmp_path):
    context = multiprocessing.get_context("spawn")
    signatures = [f"conv {i}" for i in range(20)]
    for round_ in range(3):
        path = tmp_path / f"book-{round_}.json"
        start, results = context.Event(), context.Queue()
        children = [context.Process(target=_choose_in_child, args=(path, signatures, start, results),
                                    name=f"rank{i}") for i in range(3)]
        for child in children:
            child.start()
        start.set()
        answers = [results.get(timeout=60) for _ in children]
        for child in children:
            child.join(timeout=60)
        assert answers[0] == answers[1] == answers[2]
        assert json.loads(path.read_text()) == dict(zip(signatures, answers[0]))


def test_a_damaged_book_is_refused_naming_the_file_and_never_emptied(tmp_path):
    path = tmp_path / "book.json"
    path.write_text('{"conv A": "eng62_k2=0", "conv B": ')
    with pytest.raises(DamagedFile) as error:
        PlanBook(path)
    assert str(path) in str(error.value) and "delete it" in str(error.value) and "\n" not in str(error.value)
    assert path.read_text() == '{"conv A": "eng62_k2=0", "conv B": '  # the choices it holds are not overwritten
    path.write_text('["conv A"]')
    with pytest.raises(DamagedFile, match="not a map of convolution signatures to plan names"):
        PlanBook(path)
