"""`stats`: equals float64 numpy statistics of the arrays h5py reads; memory flat in cache size; plots, HTML and
Cosmos-Predict2 mean/std files read back with PIL, html.parser and torch.load as Cosmos reads them."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from PIL import Image

from helpers import SRC
from latentforge.cli.main import main
from latentforge.dataset.synthetic_cache import SyntheticCacheSpec, write_synthetic_cache
from latentforge.report.statistics import compute_stats, export_cosmos_mean_std
from latentforge.report.stats_report import write_stats_report


def _all_rows(root: Path, dataset: str) -> np.ndarray:
    config = json.loads((root / "cache_config.json").read_text())
    arrays = []
    for path in sorted((root / "shards").glob("*.h5")):
        with h5py.File(path, "r") as shard:
            arrays.append(shard[dataset][()])
    stacked = np.concatenate(arrays)
    assert len(stacked) == config["num_samples"]
    return stacked


def _close(ours, reference) -> None:
    reference = np.asarray(reference, dtype=np.float64)
    scale = np.abs(reference).max()  # relative to the largest value: some haar means are exactly 0
    np.testing.assert_allclose(np.asarray(ours), reference, rtol=1e-6, atol=1e-6 * scale)


@pytest.mark.parametrize("every", [1, 3])
def test_stats_equal_float64_numpy(tmp_path, every):
    root = write_synthetic_cache(tmp_path / "cache", SyntheticCacheSpec(num_samples=23, rows_per_shard=5))
    stats = compute_stats(root, extreme=1.5, every=every)
    latents = _all_rows(root, "perception_latent_state")[::every].astype(np.float64)
    for m in stats.modalities:
        x = latents[:, m.channels[0] : m.channels[1]]
        _close(m.mean, x.mean(axis=(0, 2, 3, 4)))
        _close(m.std, x.std(axis=(0, 2, 3, 4)))
        _close(m.frame_mean, x.mean(axis=(0, 3, 4)))
        _close(m.frame_std, x.std(axis=(0, 3, 4)))
        _close(m.later_frames_std, x[:, :, 1:].std(axis=(0, 2, 3, 4)))
        assert m.min == x.min(axis=(0, 2, 3, 4)).tolist() and m.max == x.max(axis=(0, 2, 3, 4)).tolist()
        _close(m.extreme_fraction, (np.abs(x) >= 1.5).mean(axis=(0, 2, 3, 4)))
        assert m.histogram == np.histogram(x, bins=stats.histogram_edges)[0].tolist()
    with h5py.File(sorted((root / "shards").glob("*.h5"))[0], "r") as shard:
        assert shard["t5_text_length"].shape == (5,)
    lengths = np.concatenate([h5py.File(p, "r")["t5_text_length"][()] for p in sorted((root / "shards").glob("*.h5"))])
    assert stats.text_lengths == dict(sorted(Counter(int(v) for v in lengths[::every]).items()))
    rejects = [json.loads(line)["reason"] for line in (root / "rejects.jsonl").read_text().splitlines()]
    assert stats.rejects_by_reason == dict(Counter(rejects)) and stats.samples_per_source == {"videos": 23}


def test_peak_memory_is_flat_in_cache_size(tmp_path):
    # 1.05 MiB of float16 latent per sample: even holding the 3N extra samples as float16 would add 63 MiB
    spec = dict(latent_frames=5, latent_height=48, latent_width=48, content="noise", text_dim=8, rows_per_shard=16)
    code = ("import resource, sys; from latentforge.report.statistics import compute_stats; "
            "compute_stats(sys.argv[1]); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    peaks = []
    for count in (20, 80):
        root = write_synthetic_cache(tmp_path / f"n{count}", SyntheticCacheSpec(num_samples=count, **spec))
        done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True,
                              env={"PYTHONPATH": os.pathsep.join(filter(None, [str(SRC),
                                                                              os.environ.get("PYTHONPATH")]))})
        peaks.append(int(done.stdout.split()[-1]) * 1024)
    assert peaks[1] - peaks[0] < 50 * 2**20, peaks


def test_cosmos_mean_std_files_load_as_cosmos_reads_them(built_cache, tmp_path):
    stats = compute_stats(built_cache)
    video, images = export_cosmos_mean_std(stats, tmp_path / "tokenizer")
    latents = _all_rows(built_cache, "perception_latent_state")[:, :16].astype(np.float64)  # rgb
    # cosmos_predict2/tokenizers/tokenizer.py _video_vae: easy_io.load (torch.load) -> (mean, std), reshaped
    video_mean, video_std = torch.load(video, map_location="cpu", weights_only=True)
    img_mean, img_std = torch.load(images, map_location="cpu", weights_only=True)
    video_mean, video_std = video_mean.reshape(1, 16, 32, 1, 1), video_std.reshape(1, 16, 32, 1, 1)
    img_mean, img_std = img_mean.reshape(1, 16, 1, 1, 1), img_std.reshape(1, 16, 1, 1, 1)
    frames = latents.shape[2]
    assert video_mean.dtype == torch.float32 and frames == 3
    _close(video_mean[0, :, :frames, 0, 0].numpy(), latents.mean(axis=(0, 3, 4)))
    _close(video_std[0, :, :frames, 0, 0].numpy(), latents.std(axis=(0, 3, 4)))
    _close(video_std[0, :, frames:, 0, 0].numpy(), np.repeat(latents[:, :, 1:].std(axis=(0, 2, 3, 4))[:, None],
                                                             32 - frames, axis=1))
    _close(img_mean[0, :, 0, 0, 0].numpy(), latents[:, :, 0].mean(axis=(0, 2, 3)))
    _close(img_std[0, :, 0, 0, 0].numpy(), latents[:, :, 0].std(axis=(0, 2, 3)))


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.sources.append(dict(attrs)["src"])


def test_plots_and_html_read_back(built_cache, tmp_path, monkeypatch, capsys):
    report = write_stats_report(compute_stats(built_cache), tmp_path / "stats")
    names = {p.name for p in report.plots}
    assert {"latent_channels.png", "latent_frames.png", "latent_values.png", "text_lengths.png", "rejects.png",
            "sources.png"} == names
    for plot in report.plots:
        with Image.open(plot) as image:
            assert image.format == "PNG" and image.size[0] > 300
            image.verify()
    parser = _Images()
    parser.feed(report.html.read_text(encoding="utf-8"))
    assert len(parser.sources) == len(report.plots)
    for source, plot in zip(parser.sources, report.plots):
        data = base64.b64decode(source.removeprefix("data:image/png;base64,"))
        assert data == plot.read_bytes() and Image.open(io.BytesIO(data)).format == "PNG"
    assert json.loads(report.stats_json.read_text())["num_samples"] == 3

    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "cli"
    assert main(["stats", str(built_cache), "--out", str(out), "--export-cosmos-mean-std", str(out / "tok")]) == 0
    assert (out / "report.html").is_file() and (out / "tok" / "video_mean_std.pt").is_file()
    assert "mean_std.pt" in capsys.readouterr().out
