"""cutlass_build.py: the CUTLASS conv library is built once per toolchain, named by what decides its code, appears
only complete, and a missing tool is named with its fix. A stand-in nvcc (a script that writes its -o file and
logs its calls) replaces CUDA's: the real build needs CUDA's compiler, which the GPU tests use."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from latentforge.errors import ConfigError
from latentforge.tokenizers.kernels.cutlass import build as cutlass_build
from latentforge.tokenizers.kernels.cutlass import conv as cutlass_conv

FAKE_NVCC = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0; fi
echo "$@" >> "{log}"
if [ -n "$FAIL" ]; then echo "conv3d_sm90.cu(1): error: something broke" >&2; exit 2; fi
while [ "$#" -gt 1 ]; do if [ "$1" = "-o" ]; then echo built > "$2"; fi; shift; done
"""


def fake_toolchain(tmp_path: Path, minor: int = 7) -> tuple[cutlass_build.Toolchain, Path]:
    log = tmp_path / "nvcc.log"
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True, exist_ok=True)
    nvcc.write_text(FAKE_NVCC.format(log=log))
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    cutlass = tmp_path / f"cutlass{minor}"
    (cutlass / "include" / "cutlass").mkdir(parents=True)
    (cutlass / "include" / "cutlass" / "version.h").write_text(
        f"#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR {minor}\n#define CUTLASS_PATCH 0\n")
    return cutlass_build.Toolchain(nvcc, cutlass, "13.0.88", cutlass_build.cutlass_version(cutlass)), log


def test_the_library_is_built_once_and_named_by_its_toolchain(tmp_path):
    toolchain, log = fake_toolchain(tmp_path)
    assert toolchain.cutlass_version == "4.7.0"
    first = cutlass_build.library(toolchain, tmp_path / "cache")
    again = cutlass_build.library(toolchain, tmp_path / "cache")
    assert first == again and first.read_text() == "built\n"
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and "-arch=sm_90a" in calls[0] and str(cutlass_build.SOURCE) in calls[0]
    assert f"-I{toolchain.cutlass / 'include'}" in calls[0]
    assert "-DLF_EVERY_CONFIG" not in calls[0]
    every = cutlass_build.library(toolchain, tmp_path / "cache", every_config=True)
    assert every != first and "-DLF_EVERY_CONFIG" in log.read_text().splitlines()[1]  # the bench's build: its own
    other, _ = fake_toolchain(tmp_path, minor=8)
    assert cutlass_build.library(other, tmp_path / "cache") != first  # another CUTLASS: another library
    assert sorted(p.name for p in (tmp_path / "cache").glob("*.so")) == sorted(
        [first.name, every.name, f"conv3d_sm90_{other.digest()}.so"])


def test_a_failed_build_leaves_no_library_and_shows_nvccs_error(tmp_path, monkeypatch):
    toolchain, _ = fake_toolchain(tmp_path)
    monkeypatch.setenv("FAIL", "1")
    with pytest.raises(RuntimeError, match=r"(?s)building the CUTLASS conv library failed.*error: something broke"
                                           r".*LATENTFORGE_CUTLASS=off"):
        cutlass_build.library(toolchain, tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [f"conv3d_sm90_{toolchain.digest()}.so.lock"]


def test_missing_tools_are_named_with_the_fix(tmp_path, monkeypatch):
    for name in ("LATENTFORGE_NVCC", "CUDA_HOME", "LATENTFORGE_CUTLASS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="need nvcc.*LATENTFORGE_NVCC"):
        cutlass_build.find_toolchain()
    toolchain, _ = fake_toolchain(tmp_path)
    monkeypatch.setenv("LATENTFORGE_NVCC", str(toolchain.nvcc))
    monkeypatch.setenv("LATENTFORGE_CUTLASS", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="nowhere.*holds no include/cutlass/version.h"):
        cutlass_build.find_toolchain()
    monkeypatch.setenv("LATENTFORGE_CUTLASS", str(toolchain.cutlass))
    found = cutlass_build.find_toolchain()
    assert (found.nvcc, found.nvcc_version, found.cutlass_version) == (toolchain.nvcc, "13.0.88", "4.7.0")


def test_cutlass_can_be_turned_off_whatever_is_installed(tmp_path, monkeypatch):
    toolchain, _ = fake_toolchain(tmp_path)
    monkeypatch.setenv("LATENTFORGE_NVCC", str(toolchain.nvcc))
    monkeypatch.setenv("LATENTFORGE_CUTLASS", "off")
    with pytest.raises(ConfigError, match="CUTLASS plans are off"):
        cutlass_build.find_toolchain()
    cutlass_conv.toolchain.cache_clear()
    try:
        assert cutlass_conv.toolchain() is None  # no CUTLASS plan timed, books keyed without CUTLASS
    finally:
        cutlass_conv.toolchain.cache_clear()
