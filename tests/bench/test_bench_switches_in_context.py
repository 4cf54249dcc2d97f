"""bench/switches_in_context.py: the variants it times, the switches it calls losing, and a --tiny run on the CPU."""

import json

import pytest

from helpers.bench_scripts import load_bench

TAIL = "s[1, 1, 1] p[0, 1, 1] bias=False bfloat16"  # strides shortened: only the shapes are read
A = f"x[1, 192, 10, 352, 640]:[1, 1, 1, 1, 1] w[192, 192, 3, 3, 3]:[1, 1, 1, 1, 1] {TAIL}"
B = f"x[1, 384, 12, 60, 104]:[1, 1, 1, 1, 1] w[32, 384, 3, 3, 3]:[1, 1, 1, 1, 1] {TAIL}"
C = f"x[1, 96, 26, 480, 832]:[1, 1, 1, 1, 1] w[96, 96, 3, 3, 3]:[1, 1, 1, 1, 1] {TAIL}"


@pytest.fixture(scope="module")
def bench():
    return load_bench("switches_in_context")


def test_each_switch_is_reverted_alone_and_all_together(bench):
    new = {A: "triton3.6.0:m128", B: "triton3.6.0:m64", C: "eng62", "only new": "eng1"}
    base = {A: "pytorch", B: "eng62", C: "eng62", "only base": "eng2"}
    assert bench.switched(new, base) == [A, B]
    books = bench.variants(new, base)
    assert list(books) == [bench.NEW, bench.CONTROL, f"revert {A}", f"revert {B}", bench.BASE]
    assert books[bench.CONTROL] == new and books[f"revert {A}"] == {**new, A: "pytorch"}
    assert books[bench.BASE] == {**new, A: "pytorch", B: "eng62"}
    assert bench.short_name(A) == "192→192 at 352×640, 10 frames"


def test_a_switch_loses_only_when_its_revert_saves_more_than_the_margin_and_the_noise_and_the_clip_runs_it(bench):
    medians = {bench.NEW: 1.000, bench.CONTROL: 1.0002, f"revert {A}": 0.997, f"revert {B}": 0.999,
               bench.BASE: 0.996}
    assert bench.losing_switches(medians, 0.002, None) == [A]
    assert bench.losing_switches(medians, 0.0005, None) == [A, B]
    # the clip runs only B: A's revert runs NEW's kernels (a control, 0.1 ms off), B's 1 ms counts
    assert bench.losing_switches({**medians, f"revert {A}": 0.9999}, 0.0005, {B}) == [B]
    # the control moved as much as B's revert: B's 1 ms is noise
    assert bench.losing_switches({**medians, bench.CONTROL: 0.9988}, 0.0005, None) == [A]
    # a revert the clip does not run (A, when only B is met) moved 3.5 ms: nothing below that is a loss
    assert bench.noise_floor({**medians, f"revert {A}": 0.9965}, {B}) == pytest.approx(0.0035)
    assert bench.losing_switches({**medians, f"revert {A}": 0.9965}, 0.0005, {B}) == []


@pytest.mark.slow
def test_tiny_run_times_every_variant_and_writes_the_book(bench, tmp_path, capsys):
    new = {A: "triton3.6.0:m128", C: "eng62"}
    base = {A: "pytorch", C: "eng62"}
    (tmp_path / "new.json").write_text(json.dumps(new))
    (tmp_path / "base.json").write_text(json.dumps(base))
    out, book = tmp_path / "result.json", tmp_path / "book.json"
    assert bench.main(["--tiny", "--book", str(tmp_path / "new.json"), "--base", str(tmp_path / "base.json"),
                       "--rounds", "2", "--workdir", str(tmp_path / "work"), "--out", str(out),
                       "--write-book", str(book)]) == 0
    result = json.loads(out.read_text())
    assert result["switched"] == [A] and result["met"] is None  # the CPU runs no plans
    assert set(result["seconds"]) == {bench.NEW, bench.CONTROL, f"revert {A}", bench.BASE}
    assert result["noise_floor_s"] == abs(result["median_s"][bench.CONTROL] - result["median_s"][bench.NEW])
    assert all(len(values) == 2 and all(v > 0 for v in values) for values in result["seconds"].values())
    assert all(result["same_bits_twice"].values())
    assert all(value == 0.0 for value in result["rel_l2_vs_new_book"].values())  # no plans: the same kernels
    expected = {**new, **{s: base[s] for s in result["losing_in_context"]}}
    assert json.loads(book.read_text()) == expected
    printed = capsys.readouterr().out
    assert "revert 192→192 at 352×640, 10 frames" in printed and "losing in context" in printed
    assert "noise floor" in printed
