"""Builds the CUTLASS conv library (cutlass/conv3d_sm90.cu) once per machine, on first use, without a GPU.

The library is compiled by `nvcc` for sm_90a against CUTLASS's headers, with the CUDA runtime linked statically
(it needs only the driver where it runs), and kept in the user's cache under a name that digests everything that
decides its code: the source, the nvcc version, CUTLASS's version and the flags. Concurrent first uses (ranks of
one host) wait on a file lock; the library appears only once complete (tmp sibling, then rename).

Where the tools come from, in order: `nvcc` — $LATENTFORGE_NVCC, $CUDA_HOME/bin/nvcc, the PATH; CUTLASS — the
checkout or header folder $LATENTFORGE_CUTLASS names (holding include/cutlass and tools/util/include), else the
`nvidia-cutlass` package's headers (`pip install --no-deps nvidia-cutlass`). LATENTFORGE_CUTLASS=off: no CUTLASS,
whatever is installed (the machine then times and replays the plans of one without it).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ....errors import ConfigError
from ....io import atomic_path

SOURCE = Path(__file__).with_name("conv3d_sm90.cu")
FLAGS = ("-std=c++17", "-O3", "-DNDEBUG", "-arch=sm_90a", "--expt-relaxed-constexpr", "-shared", "-Xcompiler",
         "-fPIC", "-cudart", "static")
OFF = "off"
FIX = ("install CUDA's nvcc (12.3 or later; set LATENTFORGE_NVCC or CUDA_HOME) and CUTLASS's headers (pip install "
       "--no-deps nvidia-cutlass, or set LATENTFORGE_CUTLASS to a CUTLASS checkout), or set LATENTFORGE_CUTLASS=off "
       "to run without CUTLASS plans")


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    cutlass: Path  # holds include/cutlass and tools/util/include
    nvcc_version: str
    cutlass_version: str

    def command(self, output: Path, every_config: bool = False) -> list[str]:
        libs = self.nvcc.parent.parent / "lib"  # a pip-installed nvcc keeps the static runtime beside it
        return [str(self.nvcc), *FLAGS, *(["-DLF_EVERY_CONFIG"] if every_config else []),
                f"-I{self.cutlass / 'include'}", f"-I{self.cutlass / 'tools/util/include'}",
                *([f"-L{libs}"] if (libs / "libcudart_static.a").exists() else []), "-o", str(output), str(SOURCE)]

    def digest(self, every_config: bool = False) -> str:
        text = "\n".join([SOURCE.read_text(encoding="utf-8"), self.nvcc_version, self.cutlass_version, *FLAGS,
                          str(every_config)])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def find_toolchain() -> Toolchain:
    """The nvcc and CUTLASS headers this machine has; ConfigError naming what is missing and how to get it."""
    nvcc = _find_nvcc()
    cutlass = _find_cutlass()
    version = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    release = re.search(r"release ([\d.]+), V([\d.]+)", version)
    return Toolchain(nvcc, cutlass, release.group(2) if release else version.strip(), cutlass_version(cutlass))


def _find_nvcc() -> Path:
    for candidate in (os.environ.get("LATENTFORGE_NVCC"),
                      os.environ.get("CUDA_HOME") and str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"),
                      shutil.which("nvcc")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ConfigError(f"CUTLASS plans need nvcc, and none was found; {FIX}")


def _find_cutlass() -> Path:
    named = os.environ.get("LATENTFORGE_CUTLASS")
    if named == OFF:
        raise ConfigError("CUTLASS plans are off (LATENTFORGE_CUTLASS=off)")
    if named:
        if not (Path(named) / "include" / "cutlass" / "version.h").is_file():
            raise ConfigError(f"LATENTFORGE_CUTLASS={named!r} holds no include/cutlass/version.h; {FIX}")
        return Path(named)
    spec = importlib.util.find_spec("cutlass_library")
    if spec and spec.submodule_search_locations:
        source = Path(next(iter(spec.submodule_search_locations))) / "source"
        if (source / "include" / "cutlass" / "version.h").is_file():
            return source
    raise ConfigError(f"CUTLASS plans need CUTLASS's headers, and none were found; {FIX}")


def cutlass_version(root: Path) -> str:
    text = (root / "include" / "cutlass" / "version.h").read_text(encoding="utf-8")
    parts = [re.search(rf"#define CUTLASS_{part} (\d+)", text) for part in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(match.group(1) if match else "?" for match in parts)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "latentforge" / "cutlass"


def library(toolchain: Toolchain | None = None, directory: Path | None = None, every_config: bool = False) -> Path:
    """The built library for this toolchain, compiled now when the cache lacks it (about a minute for the plan
    candidates on one core; `every_config` adds the configs measured to lose, for the bench); RuntimeError with
    nvcc's last lines and the fix when the build fails."""
    toolchain = toolchain or find_toolchain()
    directory = directory or cache_dir()
    final = directory / f"conv3d_sm90_{toolchain.digest(every_config)}{'_all' if every_config else ''}.so"
    if final.exists():
        return final
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / (final.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not final.exists():  # another process may have built it while this one waited
                with atomic_path(final) as tmp:
                    command = toolchain.command(tmp, every_config)
                    done = subprocess.run(command, capture_output=True, text=True)
                    if done.returncode != 0:
                        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
                        raise RuntimeError(f"building the CUTLASS conv library failed ({' '.join(command)}):\n{tail}\n"
                                           f"Fix: {FIX}")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return final
