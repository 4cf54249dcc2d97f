"""Reference implementations we did not write, fetched from PyPI wheels and imported from their files.

- `wan/modules/vae2_1.py` from `wan22==2.2.11` (the official Wan2.1 VAE; imports only torch and einops).
- `wan/modules/vae2_2.py` from the same wheel (the official Wan2.2 VAE; the same imports).
- `cosmos_predict2/tokenizers/tokenizer.py` (+ its `interface.py`) from `cosmos-predict2==1.0.9`.

The wheels' pinned dependencies cannot be installed beside our stack, so only these files are extracted.
`tokenizer.py` also imports three `imaginaire.utils` modules that pull loguru, pynvml and megatron; they are
replaced by stubs with the single-process behaviour of the real ones: `log` (logging only), `distributed`
(`get_rank` -> 0, `broadcast` and `sync_model_states` do nothing, as the real ones do when torch.distributed
is not initialised) and `easy_io` (IO only: `load` is `torch.load(weights_only=True)`).

The cache folder is LATENTFORGE_TEST_REFS, else ~/.cache/latentforge-test-refs. Fetching failures raise:
these references are the point of the tests, so they are never skipped.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import torch

WAN_WHEEL = ("wan22", "2.2.11", "wan/modules/vae2_1.py")
WAN22_MEMBER = "wan/modules/vae2_2.py"
# The Wan2.2 VAE as Wan2_2_VAE builds it (z 48, patchified input), at tiny widths (released: 160 and 256)
TINY_WAN22 = dict(dim=8, dec_dim=8, z_dim=48, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                  temperal_downsample=[False, True, True], dropout=0.0)  # fmt: skip
COSMOS_WHEEL = ("cosmos-predict2", "1.0.9", "cosmos_predict2/tokenizers/tokenizer.py")
COSMOS_INTERFACE = "cosmos_predict2/tokenizers/interface.py"


def cache_dir() -> Path:
    return Path(os.environ.get("LATENTFORGE_TEST_REFS", Path.home() / ".cache" / "latentforge-test-refs"))


def _wheel(project: str, version: str) -> Path:
    folder = cache_dir()
    stem = f"{project.replace('-', '_')}-{version}-"
    found = sorted(folder.glob(f"{stem}*.whl")) if folder.is_dir() else []
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", f"{project}=={version}", "-d", str(folder)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    found = sorted(folder.glob(f"{stem}*.whl"))
    if result.returncode != 0 or not found:
        raise RuntimeError(
            f"could not fetch the reference wheel {project}=={version} with {' '.join(command)} "
            f"(exit {result.returncode}):\n{result.stdout}\n{result.stderr}\n"
            f"Put the wheel in {folder} or point LATENTFORGE_TEST_REFS at a folder holding it."
        )
    return found[0]


def _extract(project: str, version: str, member: str) -> Path:
    target = cache_dir() / f"{project}-{version}" / member
    if not target.is_file():
        with zipfile.ZipFile(_wheel(project, version)) as wheel:
            data = wheel.read(member)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    return target


def _load_module(name: str, path: Path) -> types.ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def official_vae_module() -> types.ModuleType:
    """The official Wan2.1 VAE module (`WanVAE_`, `Wan2_1_VAE`, `_video_vae`)."""
    return _load_module("wan_reference_vae2_1", _extract(*WAN_WHEEL))


def official_vae22_module() -> types.ModuleType:
    """The official Wan2.2 VAE module (`WanVAE_`, `Wan2_2_VAE`, `patchify`)."""
    return _load_module("wan_reference_vae2_2", _extract(WAN_WHEEL[0], WAN_WHEEL[1], WAN22_MEMBER))


def tiny_official_wan22(folder: Path, seed: int) -> tuple[torch.nn.Module, Path]:
    """The official Wan2.2 WanVAE_ at tiny widths, every tensor random, saved with torch.save as Wan2.2_VAE.pth."""
    with torch.device("meta"):
        model = official_vae22_module().WanVAE_(**TINY_WAN22)
    model = model.to_empty(device="cpu").eval().requires_grad_(False)  # every tensor is set just below
    randomise_parameters(model, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "Wan2.2_VAE.pth"
    torch.save(model.state_dict(), path)
    return model, path


def _install_cosmos_stubs() -> None:
    logger = logging.getLogger("cosmos_reference")
    log = types.ModuleType("imaginaire.utils.log")
    for level in ("debug", "info", "warning", "error", "critical"):
        setattr(log, level, getattr(logger, level))
    log.success = logger.info

    distributed = types.ModuleType("imaginaire.utils.distributed")
    distributed.get_rank = lambda group=None: 0
    distributed.broadcast = lambda tensor, src, group=None, async_op=False: tensor
    distributed.sync_model_states = lambda model, *args, **kwargs: None

    easy_io_module = types.ModuleType("imaginaire.utils.easy_io")
    easy_io_module.easy_io = types.SimpleNamespace(
        load=lambda path, backend_key=None, map_location=None: torch.load(
            path, map_location=map_location, weights_only=True
        )
    )

    packages = {name: types.ModuleType(name) for name in ("imaginaire", "imaginaire.utils")}
    packages["imaginaire.utils"].log = log
    packages["imaginaire.utils"].distributed = distributed
    packages["imaginaire.utils"].easy_io = easy_io_module
    for name in ("cosmos_predict2", "cosmos_predict2.tokenizers"):
        packages[name] = types.ModuleType(name)
        packages[name].__path__ = []
    sys.modules.update(packages)
    sys.modules["imaginaire.utils.log"] = log
    sys.modules["imaginaire.utils.distributed"] = distributed
    sys.modules["imaginaire.utils.easy_io"] = easy_io_module


def cosmos_tokenizer_module() -> types.ModuleType:
    """Cosmos-Predict2's tokenizer module (`VAE`, `TokenizerInterface`), with the stubs described above."""
    if "cosmos_predict2.tokenizers.tokenizer" in sys.modules:
        return sys.modules["cosmos_predict2.tokenizers.tokenizer"]
    project, version, member = COSMOS_WHEEL
    tokenizer_path = _extract(project, version, member)
    interface_path = _extract(project, version, COSMOS_INTERFACE)
    _install_cosmos_stubs()
    _load_module("cosmos_predict2.tokenizers.interface", interface_path)
    return _load_module("cosmos_predict2.tokenizers.tokenizer", tokenizer_path)


def cosmos_tokenizer_interface(vae_pth: Path, temporal_window: int, dim: int = 96) -> object:
    """Cosmos' `TokenizerInterface` on CPU, built as its `__init__` does but with device="cpu".

    `TokenizerInterface.__init__` leaves `VAE`'s device at its "cuda" default; everything else (bf16 weights,
    is_amp=False, load_mean_std=False, the temporal window) is passed exactly as `__init__` passes it. `dim`: the
    width the wrapper's own model builder (`_video_vae`, which takes the architecture's keywords) builds; the
    released Wan2.1 VAE is 96 wide.
    """
    module = cosmos_tokenizer_module()
    interface = object.__new__(module.TokenizerInterface)
    build = module._video_vae
    module._video_vae = functools.partial(build, dim=dim)
    try:
        interface.model = module.VAE(
            dtype=torch.bfloat16,
            is_amp=False,
            load_mean_std=False,
            vae_pth=str(vae_pth),
            temporal_window=temporal_window,
            device="cpu",
        )
    finally:
        module._video_vae = build
    interface.chunk_duration = 81
    return interface


def randomise_parameters(model: torch.nn.Module, seed: int) -> None:
    """Every tensor random, gammas and biases included (defaults of 1 and 0 would hide a swapped key)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("gamma"):
                param.copy_(torch.rand(param.shape, generator=generator) + 0.5)
            elif name.endswith("bias"):
                param.copy_((torch.rand(param.shape, generator=generator) - 0.5) * 0.2)
            else:
                param.copy_(torch.randn(param.shape, generator=generator) / param[0].numel() ** 0.5)
