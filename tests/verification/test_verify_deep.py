"""Deep verify: passes on a fresh cache; each tamper (SHA256SUMS rewritten, so integrity passes) fails the named
check at the right dataset_index; a different checkpoint is refused; PSNR/SSIM equal numpy and scikit-image."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity

from latentforge.cache.checksums import write_sha256sums
from latentforge.cache.rows import ManifestRow, read_manifest
from latentforge.cli.main import main
from latentforge.sinks.hdf5.integrity import verify_integrity
from latentforge.sinks.hdf5.manifest_table import write_manifest_table
from latentforge.tokenizers.haar import HaarTokenizer
from latentforge.verification.deep import verify_deep
from latentforge.verification.reencode import Overrides

LATENT = "perception_latent_state"
DEEP_CHECKS = {"tokenizer", "sources", "provenance", "reencode", "latent_frame0", "quality", "text_encoder",
               "text_reencode"}


def _rows(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]


def _tamper_done(root: Path) -> None:
    # as a buggy build would, after the damage: the index and checksums agree, so integrity alone cannot see it
    write_manifest_table(root, list(read_manifest(root)))
    write_sha256sums(root)
    assert verify_integrity(root).ok


def _failed(report) -> dict[str, list]:
    assert not report.ok
    found: dict[str, list] = {}
    for check in report.failures:
        found.setdefault(check.name, []).append(check.dataset_index)
    return found


def test_fresh_cache_passes_and_writes_the_report(built_cache):
    report = verify_deep(built_cache, spot=10)
    assert report.ok, report.failures
    assert {c.name for c in report.checks} == DEEP_CHECKS
    assert report.spot == [0, 1, 2] and report.comparison.startswith("exact")  # cache_config records the environment
    assert {(q.dataset_index, q.modality) for q in report.quality} == {(i, m) for i in range(3)
                                                                        for m in ("rgb", "mask", "depth")}
    written = json.loads((built_cache / "build" / "verify_report.json").read_text())
    assert written["ok"] and [c["name"] for c in written["deep"]] == [c.name for c in report.checks]


def test_exact_comparison_catches_one_ulp(cache):
    assert verify_deep(cache, spot=3).comparison.startswith("exact")
    with h5py.File(cache / _rows(cache)[1]["shard_path"], "r+") as shard:
        value = shard[LATENT][1, 3, 1, 2, 2]
        shard[LATENT][1, 3, 1, 2, 2] = np.nextafter(value, np.float16(np.inf), dtype=np.float16)
    _tamper_done(cache)
    assert _failed(verify_deep(cache, spot=3)) == {"reencode": [1]}


def test_one_latent_value_altered(cache):
    with h5py.File(cache / _rows(cache)[2]["shard_path"], "r+") as shard:
        shard[LATENT][0, 20, 2, 1, 3] += 4.0  # mask channel 4, latent frame 2: not frame 0, not the text
    _tamper_done(cache)
    report = verify_deep(cache, spot=3)
    assert _failed(report) == {"reencode": [2]}
    assert "rel-L2" in report.failures[0].detail and "[c,t,y,x]=[20, 2, 1, 3]" in report.failures[0].detail


def test_frame_indices_shifted_by_one(cache):
    lines = (cache / "manifest.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    row = json.loads(lines[1])
    row["provenance"]["frame_indices"] = [i + 1 for i in row["provenance"]["frame_indices"]]
    lines[1] = json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"
    (cache / "manifest.jsonl").write_text("".join(lines), encoding="utf-8")
    _tamper_done(cache)
    found = _failed(verify_deep(cache, spot=3))
    assert found["reencode"] == [1] and found["provenance"] == [1] and set(found) <= {
        "reencode", "provenance", "latent_frame0", "quality"}


def test_text_row_zeroed(cache):
    row = _rows(cache)[0]
    with h5py.File(cache / row["shard_path"], "r+") as shard:
        shard["t5_text_embeddings"][row["cache_row"]] = 0
    _tamper_done(cache)
    report = verify_deep(cache, spot=3)
    assert _failed(report) == {"text_reencode": [0]}


def test_text_model_missing_is_a_warning_not_a_pass(built_cache, tmp_path):
    report = verify_deep(built_cache, spot=1, overrides=Overrides(text_path=str(tmp_path / "nowhere")),
                         report_path=tmp_path / "report.json")
    assert report.ok and "text_reencode" not in {c.name for c in report.checks}
    assert [w.name for w in report.warnings if w.name != "quality"] == ["text_reencode"]


def test_psnr_and_ssim_equal_numpy_and_skimage(built_cache):
    from latentforge.verification.reencode import SampleFinder, recorded_config, recorded_pixels

    report = verify_deep(built_cache, indices=[1])
    row = _rows(built_cache)[1]
    config = recorded_config(built_cache, Overrides())
    typed = ManifestRow.from_json(row)
    pixels, _ = recorded_pixels(typed, SampleFinder(built_cache, config, False).sample(typed), config)
    with h5py.File(built_cache / row["shard_path"], "r") as shard:
        latent = shard[LATENT][row["cache_row"]].astype(np.float32)
    for q, (name, frames) in zip(report.quality, pixels.modalities.items()):
        lo = 16 * ["rgb", "mask", "depth"].index(name)
        decoded = HaarTokenizer().decode(torch.from_numpy(latent[None, lo : lo + 16]))[0].numpy()
        decoded = np.clip(decoded.astype(np.float64), -1, 1).transpose(1, 2, 3, 0)  # [T,H,W,3]
        frames = frames.expanded()
        source = frames.astype(np.float64) / 127.5 - 1 if frames.dtype == np.uint8 else frames.astype(np.float64)
        mse = np.mean((decoded - source) ** 2)
        assert q.modality == name and q.psnr_db == pytest.approx(10 * np.log10(4.0 / mse), abs=1e-4)
        ssim = np.mean([structural_similarity(source[t], decoded[t], channel_axis=-1, data_range=2.0)
                        for t in range(len(source))])
        assert q.ssim == pytest.approx(ssim, abs=1e-4)


def test_cli_exit_codes_and_thresholds(cache, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["verify", str(cache), "--deep", "--spot", "1"]) == 0
    assert "cache verified" in capsys.readouterr().out
    assert main(["verify", str(cache), "--deep", "--index", "2", "--fail-psnr", "99", "--warn-psnr", "99"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "quality" in out and "cache FAILED verification" in out


def test_tiny_wan_cache_verifies_and_another_checkpoint_is_refused(tmp_path):
    """The real Wan2.1 VAE architecture at width 16 (random weights, official .pth key names) at 16x16 px."""
    from diffusers import AutoencoderKLWan

    from helpers.builds import build_quietly, tiny_config, tiny_world, write_table
    from latentforge.tokenizers.wan.wan21_checkpoint import diffusers_to_wan_key

    torch.manual_seed(0)
    model = AutoencoderKLWan(base_dim=16).eval()
    state = {diffusers_to_wan_key(k): v for k, v in model.state_dict().items()}
    torch.save(state, tmp_path / "Wan2.1_VAE.pth")
    # Same architecture, other weights; zero-stride tensors keep the file a few bytes
    torch.save({k: torch.zeros(()).expand(v.shape) for k, v in state.items()}, tmp_path / "other.pth")
    del model, state
    table = write_table(tiny_world(tmp_path / "world", clips=2), tmp_path / "world" / "samples.csv")
    root = tmp_path / "cache"
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=(
        "tokenizer.name=wan2.1", f"tokenizer.checkpoint={tmp_path / 'Wan2.1_VAE.pth'}", "frames.num_frames=5",
        "frames.height=16", "frames.width=16", "output.latent_dataset=video_latent_state")))

    from latentforge.verification.quality import QualityThresholds

    anything = QualityThresholds(-np.inf, -np.inf, -np.inf, -np.inf)  # random weights decode to noise
    report = verify_deep(root, spot=1, thresholds=anything)
    assert report.ok, report.failures
    assert report.comparison.startswith("exact") and len(report.quality) == 1

    refused = verify_deep(root, spot=1, overrides=Overrides(tokenizer_checkpoint=str(tmp_path / "other.pth")),
                          thresholds=anything)
    assert _failed(refused) == {"tokenizer": [None]}
    recorded = json.loads((root / "cache_config.json").read_text())["tokenizer"]["checkpoint_sha256"]
    assert "refused" in refused.failures[0].detail and recorded in refused.failures[0].detail
    assert [c.name for c in refused.checks] == ["tokenizer"]  # nothing re-encoded with the wrong weights
