"""A latentforge WebDataset cache read by Megatron-Energon: `energon prepare` on a copy of the root, with and without
`--exclude empty_prompt`, then `latentforge verify` of the prepared root and every sample of energon's train split
read through its loader (a Cooker over CrudeWebdataset; the sample keys and latent shapes compared with the cache's
manifest and cache_config.json). Prints a table and the versions.

Energon is not a dependency of latentforge: run this with a Python that has both, e.g. a venv over the project's
(its torch, so pip pulls no other):

    python -m venv /tmp/energon
    .venv/bin/python -c "import site; print(site.getsitepackages()[0])" \\
        > /tmp/energon/lib/python3.11/site-packages/project-venv.pth     # the project's packages, torch included
    /tmp/energon/bin/pip install -c constraints.txt megatron-energon
    PYTHONPATH=src /tmp/energon/bin/python bench/tools/energon_prepare.py [ROOT]

Without ROOT it builds the demo's world (haar tokenizer, tiny T5) as a WebDataset cache in a temporary folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
sys.path.insert(0, str(SRC))

CRUDE_DATASET_YAML = "__module__: megatron.energon\n__class__: CrudeWebdataset\n"


def tiny_cache(folder: Path) -> Path:
    """The demo's world and tiny T5, built with output.sink=webdataset into a few small tars."""
    from latentforge import build, load_config
    from latentforge.demo.tiny_text_model import make_tiny_t5
    from latentforge.demo.world import make_world

    table = make_world(folder / "world", clips=6)
    model = make_tiny_t5(folder / "t5", d_model=64)
    root = folder / "cache"
    build(load_config(preset="openvid-perception-stage1", extra={
        "dataset": {"reader": "table", "path": [str(table)], "id_column": "id"},
        "frames": {"num_frames": 9, "height": 32, "width": 48}, "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "haar-4x8x8", "precision": "fp32"},
        "text": {"name": "t5", "path": str(model), "precision": "fp32"},
        "output": {"root": str(root), "sink": "webdataset", "shard_bytes": 4096, "unit_size": 2,
                   "min_free_bytes": 0}}), quiet=True)
    return root


def prepare(root: Path, exclude: bool) -> str:
    """`energon prepare ROOT [--exclude empty_prompt]`, everything in the train split; the command as typed."""
    command = ["energon", "prepare", str(root), "--num-workers", "1"]
    command += ["--exclude", "empty_prompt"] if exclude else []
    energon = [sys.executable, "-m", "megatron.energon.cli.main"]
    helptext = subprocess.run([*energon, "prepare", "--help"], capture_output=True, text=True).stdout
    if "--non-interactive" in helptext:  # energon 6 and later
        command += ["--non-interactive", "--split-ratio", "1,0,0", "--skip-dataset-yaml"]
        subprocess.run([*energon, *command[1:]], check=True, capture_output=True, text=True)
    else:  # energon 5 asks for the split (all in train) and whether to write dataset.yaml (no)
        subprocess.run([*energon, *command[1:]], input="1,0,0\nn\n", check=True, capture_output=True, text=True)
    (root / ".nv-meta" / "dataset.yaml").write_text(CRUDE_DATASET_YAML)
    return " ".join([*command[:2], "ROOT", *command[5:]])


def read_train_split(root: Path) -> tuple[list[str], list[tuple[int, ...]], str]:
    """Every sample of the prepared root's train split through energon's loader: keys, latent shapes, and the
    samples that failed (energon logs those and reads on)."""
    import numpy as np
    import torch
    from megatron.energon import (
        Cooker,
        DefaultTaskEncoder,
        Sample,
        WorkerConfig,
        basic_sample_keys,
        get_loader,
        get_val_dataset,
    )

    @dataclasses.dataclass
    class LatentSample(Sample):
        latent: torch.Tensor

    failed: list[str] = []

    def cook(crude: dict) -> LatentSample:
        try:
            latent = crude["latent.npy"]
        except KeyError as error:  # energon logs a failing sample and goes on: count it here
            failed.append(f"{crude['__key__']}: KeyError {error}")
            raise
        return LatentSample(**basic_sample_keys(crude), latent=torch.from_numpy(np.asarray(latent)))

    class Encoder(DefaultTaskEncoder):
        cookers = [Cooker(cook)]

    keys: list[str] = []
    shapes: list[tuple[int, ...]] = []
    try:
        dataset = get_val_dataset(str(root), split_part="train", batch_size=1, task_encoder=Encoder(),
                                  worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0))
        for batch in get_loader(dataset):
            keys += list(batch.__key__)
            shapes += [tuple(batch.latent.shape[1:])]
    except Exception as error:  # what a trainer would hit; the table shows it
        failed.append(f"{type(error).__name__}: {error}")
    return keys, shapes, "; ".join(failed)


def trial(source: Path, work: Path, exclude: bool) -> dict:
    root = work / ("excluded" if exclude else "included")
    shutil.copytree(source, root)
    command = prepare(root, exclude)
    verified = subprocess.run([sys.executable, "-m", "latentforge.cli.main", "verify", str(root)],
                              capture_output=True, text=True)  # the worktree's src: PYTHONPATH=src
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    expected_keys = [f"{row['shard_path']}/{row['dataset_index']:09d}" for row in rows]
    shape = tuple(json.loads((root / "cache_config.json").read_text())["latent"]["shape"])
    keys, shapes, error = read_train_split(root)
    train = (root / ".nv-meta" / "split.yaml").read_text()
    return {"command": command, "empty_prompt_in_train": "empty_prompt.tar" in train,
            "verify_exit": verified.returncode, "verify_notes_index": "reader_index" in verified.stdout,
            "samples_read": len(keys), "samples": len(rows),
            "keys_equal_manifest": keys == expected_keys, "shapes_equal_config": set(shapes) <= {shape},
            "error": error}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", help="a local WebDataset cache (default: build the demo's, tiny)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = Path(args.root) if args.root else tiny_cache(work / "tiny")
        results = [trial(source, work, exclude) for exclude in (True, False)]
    print(f"{'energon prepare':<55} {'empty_prompt in train':>21} {'verify':>6} {'read':>7}  error")
    for r in results:
        read = f"{r['samples_read']}/{r['samples']}"
        print(f"{r['command']:<55} {str(r['empty_prompt_in_train']):>21} {r['verify_exit']:>6} {read:>7}  "
              f"{r['error'] or '-'}")
    machine = {"python": platform.python_version(), "megatron-energon": metadata.version("megatron-energon"),
               "torch": metadata.version("torch"), "machine": platform.machine()}
    print(", ".join(f"{k} {v}" for k, v in machine.items()))
    if args.out:
        Path(args.out).write_text(json.dumps({"machine": machine, "results": results}, indent=2))
    good = results[0]
    ok = (good["verify_exit"] == 0 and good["verify_notes_index"] and not good["empty_prompt_in_train"]
          and good["samples_read"] == good["samples"] and good["keys_equal_manifest"] and good["shapes_equal_config"]
          and not good["error"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
