"""`latentforge demo --out DIR` exits 0 and leaves a verified cache that `verify` and `inspect` accept."""

from __future__ import annotations

import json
import subprocess

import h5py
import pytest

from helpers.builds import read_manifest
from latentforge.cli.main import main

pytestmark = pytest.mark.slow  # a long end-to-end run; -m 'not slow' leaves it out


def test_demo_cli_leaves_a_verified_cache(demo_run, capsys, monkeypatch):
    assert "passed" in demo_run.stdout and "PSNR depth" in demo_run.stdout

    root = demo_run.root
    assert (root / "_CACHE_COMPLETE").is_file() and not (root / "_SUCCESS").exists()
    sums = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=root, capture_output=True, text=True)
    assert sums.returncode == 0, sums.stdout + sums.stderr
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["verify", str(root)]) == 0
    assert "cache verified" in capsys.readouterr().out

    manifest = read_manifest(root)
    rejects = [json.loads(line) for line in (root / "rejects.jsonl").read_text().splitlines()]
    assert len(manifest) == 9 and [(r["sample_id"], r["reason"]) for r in rejects] == [("clip_009", "too_short")]
    with h5py.File(root / manifest[0]["shard_path"], "r") as shard:
        assert shard["perception_latent_state"].shape[1:] == (48, 5, 8, 12)  # 17 frames at 64x96
        assert shard["t5_text_embeddings"].shape[1:] == (512, 1024)
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "untrained" in readme  # nobody may mistake the demo's text embeddings for a real T5's

    assert main(["inspect", str(root), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["num_samples"] == len(manifest)
