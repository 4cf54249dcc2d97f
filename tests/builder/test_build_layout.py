"""A real build of the perception layout (rgb+mask+depth, t5 of width 1024) checked with h5py, sha256sum,
bash, transformers and a second build into another root (issue 2, "Layout")."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import transformers
import yaml

from helpers.builds import (
    build_quietly,
    checksummed_bytes,
    read_manifest,
    tiny_config,
    tiny_extra,
    tiny_t5,
    tiny_world,
    write_table,
)
from helpers.golden import text_problem
from helpers.integrity_commands import SEED_000_INTEGRITY  # noqa: E402
from latentforge.cli.main import main

NUM_SAMPLES = 3  # world clips 0..2; clip_003 is too short
ROWS_PER_SHARD = 2
LATENT = (48, 3, 4, 6)  # 3 modalities x 16 channels, 1 + (9-1)/4 frames, 32/8 x 48/8
TEXT = (512, 1024)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The same build twice: through build() into one root, decoding on the encoder thread; through the CLI, a
    YAML file and a spawned decode worker into another."""
    base = tmp_path_factory.mktemp("layout")
    rows = tiny_world(base / "world", clips=4)
    table = write_table(rows, base / "world" / "samples.parquet")
    model = tiny_t5(base / "tiny-t5", rows)
    first, second = base / "first" / "cache", base / "second" / "cache"
    build_quietly(tiny_config(table, first, text_path=model))
    config_file = base / "build.yaml"
    extra = tiny_extra(table, Path("unused"), text_path=model)
    del extra["output"]["root"]
    extra["run"]["workers_per_gpu"] = 1
    config_file.write_text(yaml.safe_dump({"preset": "openvid-perception-stage1", **extra}), encoding="utf-8")
    assert main(["build", "--config", str(config_file), "--out", str(second), "--quiet"]) == 0  # the CLI, here
    return first, second, model, rows


def test_h5py_sees_the_exact_names_dtypes_shapes_and_chunking(built):
    root = built[0]
    shards = sorted((root / "shards").iterdir())
    assert [p.name for p in shards] == ["part-00000-of-00002-000000000-000000002.h5",
                                        "part-00001-of-00002-000000002-000000003.h5"]
    for shard, rows in zip(shards, (2, 1)):
        with h5py.File(shard, "r") as handle:
            found = {name: (ds.dtype, ds.shape, ds.chunks, ds.compression) for name, ds in handle.items()}
        assert found == {
            "perception_latent_state": (np.dtype("float16"), (rows, *LATENT), (1, *LATENT), None),
            "t5_text_embeddings": (np.dtype("float16"), (rows, *TEXT), (1, *TEXT), None),
            "t5_text_length": (np.dtype("uint16"), (rows,), (1,), None),
            "source_index": (np.dtype("int64"), (rows,), (1,), None),
        }
    with h5py.File(root / "empty_prompt.h5", "r") as handle:
        assert {n: (d.dtype, d.shape) for n, d in handle.items()} == {
            "t5_text_embeddings": (np.dtype("float16"), (1, *TEXT)),
            "t5_text_length": (np.dtype("uint16"), (1,)),
        }
    manifest = read_manifest(root)
    assert [(r["dataset_index"], r["shard_path"], r["cache_row"]) for r in manifest] == [
        (0, "shards/" + shards[0].name, 0), (1, "shards/" + shards[0].name, 1), (2, "shards/" + shards[1].name, 0)]


def test_sha256sum_accepts_sha256sums_and_it_covers_every_file(built):
    root = built[0]
    done = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    on_disk = sorted(
        os.path.relpath(os.path.join(folder, name), root)
        for folder, _, names in os.walk(root) for name in names
    )
    expected = [p for p in on_disk if p not in ("SHA256SUMS", "_CACHE_COMPLETE") and not p.startswith("build/")]
    assert sorted(checksummed_bytes(root)) == expected
    assert {"README.md", "cache_config.json", "manifest.jsonl", "rejects.jsonl", "empty_prompt.h5"} <= set(expected)


def _bash(script: str, cwd: Path, cache_root: Path | None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin"} | ({"CACHE_ROOT": str(cache_root)} if cache_root else {})
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True)


def test_seed_000_integrity_commands_pass_with_cache_complete_for_success(built, tmp_path):
    root = built[0]
    counts = [c.replace("-eq 28", "-eq 2").replace("-eq 82869", f"-eq {NUM_SAMPLES}") for c in SEED_000_INTEGRITY]
    local = ['test -f "$CACHE_ROOT/_CACHE_COMPLETE" && test ! -e "$CACHE_ROOT/_SUCCESS"'] + counts[1:]
    done = _bash(" && ".join(local), tmp_path, root)
    assert done.returncode == 0, done.stderr
    assert _bash(" && ".join(counts), tmp_path, root).returncode != 0  # verbatim: no _SUCCESS before publish


def test_cache_readme_integrity_block_passes_in_bash(built, tmp_path):
    root = built[0]
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Integrity check.*?```bash\n(.*?)```", readme, re.S).group(1)
    for cwd, cache_root in ((root, None), (tmp_path, root)):
        done = _bash(block, cwd, cache_root)
        assert done.returncode == 0 and f"2 shards, {NUM_SAMPLES} samples" in done.stdout, done.stderr
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    shard = next((copy / "shards").iterdir())
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert _bash(block, copy, None).returncode != 0


def test_cache_config_records_channel_ranges_and_the_conditioning_role(built):
    config = json.loads((built[0] / "cache_config.json").read_text(encoding="utf-8"))
    latent = config["latent"]
    assert latent["dataset"] == "perception_latent_state" and latent["shape"] == list(LATENT)
    assert [(m["name"], m["channels"], m["role"]) for m in latent["modalities"]] == [
        ("rgb", [0, 16], "conditioning+target"), ("mask", [16, 32], "target"), ("depth", [32, 48], "target")]
    assert latent["conditioning"] == {"modality": "rgb", "latent_frames": [0, 1]}
    assert (config["num_samples"], config["num_shards"], config["rows_per_shard"]) == (NUM_SAMPLES, 2, 2)
    assert config["text"]["dim"] == 1024 and config["text"]["max_length"] == 512


def _transformers_rows(model: Path, prompts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Cosmos' encode_prompts written with plain transformers calls, cast to float16 like the cache."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    encoder = transformers.T5EncoderModel.from_pretrained(model, dtype=torch.float32).eval()
    tokens = tokenizer(prompts, padding="max_length", max_length=512, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = encoder(**tokens).last_hidden_state.numpy()
    lengths = tokens["attention_mask"].sum(dim=1).numpy()
    hidden[np.arange(512)[None, :] >= lengths[:, None]] = 0.0
    return hidden.astype(np.float16), lengths


def _equal_to_one_float16_step(got: np.ndarray, want: np.ndarray) -> None:
    """Equal after the float16 cast up to one rounding step plus float32's own error near 0 (helpers.golden's
    TEXT_TOLERANCE): the reference pads every prompt to 512 positions, the build runs each prompt alone over its
    own tokens, and the float32 sums over the two lengths round differently (seen: a value of -8.9e-4, the
    difference of larger ones, 1.9e-6 apart on an AVX-512 CPU: four float16 steps, within float32's error)."""
    assert got.dtype == want.dtype == np.float16
    problem = text_problem(got, want)
    assert problem is None, problem


def test_t5_rows_equal_transformers_output(built):
    root, _, model, _ = built
    manifest = read_manifest(root)
    prompts = [row["prompt"] for row in manifest] + [""]
    want, want_lengths = _transformers_rows(model, prompts)
    for i, row in enumerate(manifest):
        with h5py.File(root / row["shard_path"], "r") as shard:
            got = shard["t5_text_embeddings"][row["cache_row"]]
            length = int(shard["t5_text_length"][row["cache_row"]])
        assert length == want_lengths[i] and 1 < length < 512
        assert not got[length:].any() and got[length - 1].any()
        _equal_to_one_float16_step(got, want[i])
    with h5py.File(root / "empty_prompt.h5", "r") as handle:
        assert int(handle["t5_text_length"][0]) == want_lengths[-1] == 1  # just </s>
        _equal_to_one_float16_step(handle["t5_text_embeddings"][0], want[-1])


def test_checksummed_files_are_byte_identical_across_roots_and_entry_points(built):
    first, second = checksummed_bytes(built[0]), checksummed_bytes(built[1])
    assert sorted(first) == sorted(second)
    assert [name for name in first if first[name] != second[name]] == []
