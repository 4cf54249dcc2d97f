"""The RGB build the section benches compare with and without their section (bench/build/audio.py, captions.py):
a table of rendered clips, the random-weight Wan2.1 VAE in bf16 (haar on the CPU), the bench's T5, one device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from _build_args import size_pair


def rgb_build_config(size: str, num_frames: int, device: str, table: Path, vae: Path | None, text: Path, root: Path,
                     unit_size: int, sections: dict[str, Any]) -> dict[str, Any]:
    """`sections`: what the bench adds (e.g. {"audio": {...}}), empty for the build without."""
    height, width = size_pair(size)
    cuda = device == "cuda"
    return {
        "dataset": {"reader": "table", "path": [str(table)], "id_column": "id"},
        "frames": {"num_frames": num_frames, "height": height, "width": width},
        "modalities": {"names": ["rgb"]},
        # bf16 on the fast path: its 93x480x832 convolutions are in the plan books shipped for the H200
        "tokenizer": ({"name": "wan2.1", "checkpoint": str(vae), "precision": "bf16"} if vae
                      else {"name": "haar-4x8x8", "precision": "fp32"}),
        "text": {"name": "t5", "path": str(text), "precision": "bf16" if cuda else "fp32"},
        "output": {"root": str(root), "unit_size": unit_size, "batch_size": 1},
        "run": {"gpus": "0"} if cuda else {"device": "cpu"},
        **sections,
    }


def write_config(work: Path, name: str, config: dict[str, Any]) -> Path:
    """WORK/configs/NAME.yaml, with WORK/logs/ made for the build's log."""
    path = work / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    (work / "logs").mkdir(parents=True, exist_ok=True)
    return path
