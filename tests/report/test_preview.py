"""`preview`: an mp4 (read back with PyAV) and a PNG sheet (read back with PIL) showing, per modality, the source
frames next to the decoded stored latents."""

from __future__ import annotations

import json

import av
import h5py
import numpy as np
import torch
from PIL import Image

from latentforge.cache.rows import ManifestRow
from latentforge.cli.main import main
from latentforge.devices import default_device, device_note
from latentforge.report.preview import GAP, PREVIEW_TIMES, preview
from latentforge.tokenizers.haar import HaarTokenizer
from latentforge.verification.reencode import Overrides, SampleFinder, recorded_config, recorded_pixels

T, H, W = 9, 32, 48  # the tiny build's frames
MODALITIES = ("rgb", "mask", "depth")


def _tile_width() -> int:
    return 2 * len(MODALITIES) * W + (2 * len(MODALITIES) - 1) * GAP


def test_preview_files_show_source_and_reconstruction(built_cache, tmp_path):
    made = preview(built_cache, samples=2, out=tmp_path)
    assert made.dataset_indices == [0, 2]

    with av.open(str(made.video)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == T and frames[0].shape == (2 * H + GAP, _tile_width(), 3)

    with Image.open(made.sheet) as image:
        assert image.format == "PNG"
        sheet = np.asarray(image.convert("RGB"))
    times = sorted({round(p * (T - 1)) for p in PREVIEW_TIMES})
    assert sheet.shape == (2 * H + GAP, len(times) * _tile_width() + (len(times) - 1) * GAP, 3)

    # sample 2 (second row), last time point: rgb source and its haar reconstruction, exactly (PNG is lossless)
    row = [json.loads(line) for line in (built_cache / "manifest.jsonl").read_text().splitlines()][2]
    config = recorded_config(built_cache, Overrides())
    typed = ManifestRow.from_json(row)
    pixels, _ = recorded_pixels(typed, SampleFinder(built_cache, config, False).sample(typed), config)
    with h5py.File(built_cache / row["shard_path"], "r") as shard:
        latent = torch.from_numpy(shard["perception_latent_state"][row["cache_row"]][None, :16].astype(np.float32))
    decoded = HaarTokenizer().decode(latent)[0].clamp(-1, 1).permute(1, 2, 3, 0).numpy()
    x0, y0 = (len(times) - 1) * (_tile_width() + GAP), H + GAP
    assert np.array_equal(sheet[y0 : y0 + H, x0 : x0 + W], pixels.modalities["rgb"].expanded()[T - 1])
    expected = np.round((decoded[T - 1].astype(np.float64) + 1) * 127.5).astype(np.uint8)
    assert np.abs(sheet[y0 : y0 + H, x0 + W + GAP : x0 + 2 * W + GAP].astype(int) - expected).max() <= 1
    # the mp4 is lossy: its reconstruction tile only resembles the PNG's
    video_tile = frames[T - 1][y0 : y0 + H, W + GAP : 2 * W + GAP].astype(float)
    assert np.abs(video_tile - expected).mean() < 8


def test_cli_preview(built_cache, tmp_path, capsys):
    assert main(["preview", str(built_cache), "--index", "1", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "preview.mp4").stat().st_size > 0 and (tmp_path / "preview.png").is_file()
    out = capsys.readouterr().out
    assert "source | reconstruction" in out
    assert f"decoding {device_note(default_device())}\n" in out  # no --device: auto, and the line says which
