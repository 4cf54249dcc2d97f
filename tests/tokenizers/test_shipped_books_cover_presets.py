"""Every convolution a preset's build runs by a recorded kernel plan is in the plan books latentforge ships for the
H200 (with and without CUTLASS), so two machines of that model build a preset's bytes alike without timing a plan
of their own. The signatures are traced on the CPU (tokenizers/wan/plan_signatures.py) for every call shape the preset's
build can make (each batch size, each bucket); the tracing itself is checked against signatures a GPU recorded:
the shipped books' entries for shapes they were recorded at."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from helpers.bench_scripts import load_bench
from latentforge.config.presets import PRESETS
from latentforge.tokenizers.wan.plan_signatures import traced_signatures
from latentforge.tokenizers.wan.wan21 import Wan21Tokenizer

BOOKS = ("NVIDIA-H200_cudnn91900_fe1.32.0_triton3.6.0", "NVIDIA-H200_cudnn91900_fe1.32.0_triton3.6.0_cutlass4.2.0")


def _book(key: str) -> dict[str, str]:
    return json.loads((resources.files("latentforge.tokenizers.kernels") / "books" / f"{key}.json").read_text())


def _preset_signatures(name: str) -> set[str]:
    """Every signature the preset's build runs by a recorded plan, as bench/tools/record_preset_plans.py traces them."""
    return load_bench("tools/record_preset_plans").preset_signatures(name)[2]


def test_tracing_finds_what_a_gpu_recorded():
    """At 93x480x832 and 93x704x1280, batch 1 (shapes the shipped books were recorded at by builds on an H200),
    every traced signature, its strides included, is one the GPU recorded; at a shape no book was recorded at, none
    is."""
    book = set(_book(BOOKS[0]))
    for frames, height, width in ((93, 480, 832), (93, 704, 1280)):
        traced = traced_signatures(Wan21Tokenizer.released_architecture, Wan21Tokenizer.fast_input,
                                   [(1, frames, height, width)], 24.0)
        assert len(traced) == 46 and traced <= book, sorted(traced - book)[:3]
    elsewhere = traced_signatures(Wan21Tokenizer.released_architecture, Wan21Tokenizer.fast_input,
                                  [(1, 17, 64, 96)], 24.0)
    assert elsewhere and not elsewhere & book


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_shipped_h200_books_hold_every_plan_a_preset_runs(name):
    signatures = _preset_signatures(name)
    for key in BOOKS:
        missing = sorted(signatures - set(_book(key)))
        assert not missing, (f"preset {name}: the shipped book {key} lacks {len(missing)} of its {len(signatures)} "
                             f"convolutions, e.g. {missing[0]}; record them with bench/tools/record_preset_plans.py "
                             "on an H200")


def test_the_plan_recording_presets_are_the_bf16_wan_ones():
    """The test above is not empty: the presets built on the bf16 fast path have signatures to hold."""
    recording = {name for name in PRESETS if _preset_signatures(name)}
    assert recording == {"openvid-perception-stage1", "cosmos-predict2-480p", "cosmos-predict2-720p"}
