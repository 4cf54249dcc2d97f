"""A demo-scale build with `wan2.2` (a tiny Wan2.2 VAE of the official module, random weights: the tokenizer
tests prove it bit-exact) verifies, deep-verifies (re-encoding its sources bit for bit) and previews with the
Wan2.2 decoder, loads in the Dataset, and is never mixed with another tokenizer's cache: not by reusing its
root (a plain build or --extend), not by Cosmos statistics."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from helpers.wan_reference import tiny_official_wan22
from latentforge import LatentCacheDataset, preview, stats, verify
from latentforge.builder.run import build
from latentforge.cache.expect import CacheMismatch
from latentforge.errors import ConfigError, LatentforgeError
from latentforge.tokenizers.wan.wan22 import Wan22Tokenizer
from latentforge.verification.quality import QualityThresholds

# Random weights cannot reconstruct anything: the quality floor is off, every other deep check stays on.
NO_QUALITY_FLOOR = QualityThresholds(fail_psnr=-1e9, warn_psnr=-1e9, fail_ssim=-1e9, warn_ssim=-1e9)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wan22-build")
    rows = tiny_world(folder / "world")
    return folder, write_table(rows, folder / "world" / "samples.csv")


@pytest.fixture(scope="module")
def official(world):
    return tiny_official_wan22(world[0] / "weights", seed=7)


@pytest.fixture(scope="module")
def built(world, official):
    folder, table = world
    root = folder / "cache"
    # rgb only: each modality's decode costs about a second on two CPU cores (the layout stacks 48 per modality)
    overrides = ("tokenizer.name=wan2.2", f"tokenizer.checkpoint={official[1]}", "tokenizer.precision=fp32")
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=overrides))
    return root


@pytest.fixture
def wan22_decodes(monkeypatch) -> list[tuple[str, tuple[int, ...]]]:
    """(checkpoint SHA-256, latent shape) of each Wan2.2 decode, which still runs."""
    calls, decode = [], Wan22Tokenizer.decode

    def recorded(self, latent):
        calls.append((self.checkpoint_sha256, tuple(latent.shape)))
        return decode(self, latent)

    monkeypatch.setattr(Wan22Tokenizer, "decode", recorded)
    return calls


def _sha256sum(path) -> str:
    return subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]


def test_build_verifies_deep_verifies_and_loads(built, official, wan22_decodes):
    assert len(read_manifest(built)) == 3  # the 6-frame clip is rejected
    assert verify(built).ok
    report = verify(built, deep=True, indices=[1], thresholds=NO_QUALITY_FLOOR)
    assert report.ok, [(c.name, c.detail) for c in report.failures]
    assert "exact" in report.comparison
    sha = _sha256sum(official[1])
    # the quality check decoded the stored latent with the build's own Wan2.2 decoder
    assert [(q.dataset_index, q.modality) for q in report.quality] == [(1, "rgb")]
    assert wan22_decodes == [(sha, (1, 48, 3, 2, 3))]
    expect = {"tokenizer_family": "wan2.2", "tokenizer_sha256": sha, "latent_shape": (48, 3, 2, 3)}
    item = LatentCacheDataset(built, expect=expect)[0]
    assert tuple(item["latent"].shape) == (48, 3, 2, 3) and float(item["latent"].abs().max()) > 0.1
    with pytest.raises(CacheMismatch, match=f"tokenizer_sha256: trainer expects '{'0' * 64}', cache has '{sha}'"):
        LatentCacheDataset(built, expect={"tokenizer_sha256": "0" * 64})


def test_preview_decodes_with_the_wan22_decoder(built, official, wan22_decodes, tmp_path):
    shown = preview(built, samples=1, out=tmp_path / "preview")
    assert shown.video.is_file() and shown.sheet.is_file()
    assert wan22_decodes == [(_sha256sum(official[1]), (1, 48, 3, 2, 3))]


def test_cosmos_statistics_are_refused_for_a_wan22_cache(built, tmp_path):
    with pytest.raises(ConfigError, match=r"encoded by wan2\.2 \(48 channels, 4x16x16\).*--tokenizer wan2\.1"):
        stats(built, out=tmp_path / "stats", cosmos_mean_std=tmp_path / "tok")
    assert not (tmp_path / "stats").exists()  # refused before any statistics were computed


def _files(root) -> dict[str, int]:
    """mtime of every file under root but the build lock and the run stats records a refused build writes."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")
            if p.is_file() and p.name != "lock" and not p.name.startswith("stats-")}


@pytest.mark.parametrize("extend", [False, True], ids=["plain", "extend"])
def test_reusing_the_root_with_another_tokenizer_is_refused(built, world, tmp_path, extend):
    root = tmp_path / "fetched"
    # plain: into a fetched copy (no build records); --extend: into a copy with the records of its build
    shutil.copytree(built, root, ignore=None if extend else shutil.ignore_patterns("build"))
    before = _files(root)
    with pytest.raises(LatentforgeError) as caught:  # haar-4x8x8, no --overwrite
        build(tiny_config(world[1], root, modalities=("rgb",)), quiet=True, extend=extend)
    message = str(caught.value)
    assert "encoded by another tokenizer" in message and "--overwrite" in message
    assert "tokenizer.name: 'wan2.2' (the cache) vs 'haar-4x8x8' (this build)" in message
    # nothing written or touched but the build lock (taken first) and the refused run's stats record
    assert _files(root) == before
