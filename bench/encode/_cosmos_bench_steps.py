"""Steps of bench/encode/encode_cosmos.py: the machine record, the clip, timing within a budget, output hashes, the
encodes in fresh processes, and NVIDIA/Cosmos-Tokenizer's own DV modules loaded with the bench's weights."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch


def machine(device: torch.device) -> dict:
    try:
        import diffusers

        diffusers_version = diffusers.__version__
    except ImportError:
        diffusers_version = None
    return {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "diffusers": diffusers_version, "python": sys.version.split()[0]}


def clip(shape: str, device: torch.device) -> torch.Tensor:
    """A [1,3,T,H,W] clip in [-1,1] with image-like structure (blurred noise that drifts), the same every call on
    a device (upsampled there: a 121x704x1280 clip takes seconds on a CPU)."""
    frames, height, width = (int(v) for v in shape.split("x"))
    generator = torch.Generator(device="cpu").manual_seed(1)
    coarse = torch.rand(1, 3, frames, height // 16 + 2, width // 16 + 2, generator=generator).to(device)
    video = torch.nn.functional.interpolate(coarse, size=(frames, height, width), mode="trilinear")
    return video * 2 - 1


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed_within(fn, device: torch.device, reps: int, budget_s: float) -> tuple[dict, torch.Tensor]:
    """Median seconds of fn() over up to `reps` calls after one warm-up, fewer (at least one) where the warm-up
    says `reps` would exceed `budget_s`; on CUDA, the peak GiB allocated during the timed calls and what was
    resident before them (the model's weights and the clip)."""
    start = time.perf_counter()
    out = fn()
    _synchronize(device)
    warmup = time.perf_counter() - start
    reps = max(1, min(reps, math.floor(budget_s / max(warmup, 1e-9))))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    resident = torch.cuda.memory_allocated() / 2**30 if device.type == "cuda" else None
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        _synchronize(device)
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
    return {"s_per_clip": statistics.median(times), "reps": reps, "warmup_s": warmup, "times_s": times,
            "peak_gib": peak, "resident_gib": resident}, out


def output_sha256(out: torch.Tensor) -> str:
    return hashlib.sha256(out.detach().cpu().contiguous().numpy().tobytes()).hexdigest()


def fresh_process_hashes(script: Path, folders: dict[str, Path], shapes: dict[str, str], device: torch.device,
                         precision: str) -> dict[str, list[str]]:
    """SHA-256 of each model's encode in two fresh processes of `script --fresh-encode SPEC`, started at once; each
    loads every checkpoint itself, so they share nothing but the files."""
    spec = json.dumps({"device": str(device), "precision": precision,
                       "models": {model: [str(folder), shapes[model]] for model, folder in folders.items()}})
    runs = [subprocess.Popen([sys.executable, str(script), "--fresh-encode", spec], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    hashes: dict[str, list[str]] = {model: [] for model in folders}
    for i, process in enumerate(runs):
        stdout, stderr = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"fresh process {i + 1} exited {process.returncode}: {stderr[-2000:]}")
        for model, sha256 in json.loads(stdout.strip().splitlines()[-1]).items():
            hashes[model].append(sha256)
    return hashes


def reference_dv_encoder(reference: Path, model, device: torch.device, dtype: torch.dtype):
    """NVIDIA/Cosmos-Tokenizer's CausalDiscreteVideoTokenizer (from `reference`/cosmos_tokenizer/, which needs
    einops and loguru) at `model`'s widths, holding its weights; returns video -> token ids."""
    if not (reference / "cosmos_tokenizer").is_dir():
        raise FileNotFoundError(f"{reference} holds no cosmos_tokenizer/ folder; pass the root of a "
                                "NVIDIA/Cosmos-Tokenizer checkout")
    sys.path.insert(0, str(reference))
    from cosmos_tokenizer.networks import TokenizerConfigs, TokenizerModels

    arch = model.arch
    config = {**TokenizerConfigs.DV.value, "spatial_compression": arch.spatial_compression,
              "temporal_compression": arch.temporal_compression, "channels": arch.channels,
              "channels_mult": list(arch.channels_mult), "num_res_blocks": arch.num_res_blocks,
              "z_channels": arch.z_channels}
    ref = TokenizerModels.DV.value(**config)
    loaded = ref.load_state_dict(model.state_dict(), strict=False)
    parameters = dict(ref.named_parameters())
    missing = [k for k in loaded.missing_keys if k in parameters]
    if missing or loaded.unexpected_keys:
        raise KeyError(f"the reference's keys differ from ours: missing {missing}, unexpected {loaded.unexpected_keys}")
    ref = ref.to(device=device, dtype=dtype).eval()  # its `to` also sets the quantizer's dtype from `dtype=`

    def encode(video: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return ref.encode(video.to(dtype))[0].long()

    return encode
