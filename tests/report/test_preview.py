"""`preview`: an mp4 (read back with PyAV) and a PNG sheet (read back with PIL) showing, per modality, the source
frames next to (mp4) or above (PNG) the decoded stored latents."""

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
from latentforge.report.preview import GAP, preview
from latentforge.report.preview_sheet import (
    BACKGROUND,
    COLUMN_LABEL_HEIGHT,
    LABEL_WIDTH,
    MIN_TILE_HEIGHT,
    MODALITY_GAP,
    SAMPLE_GAP,
    TITLE_HEIGHT,
)
from latentforge.tokenizers.haar import HaarTokenizer
from latentforge.verification.reencode import Overrides, SampleFinder, recorded_config, recorded_pixels

T, H, W = 9, 32, 48  # the tiny build's frames
MODALITIES = ("rgb", "mask", "depth")


def _tile_width() -> int:
    return 2 * len(MODALITIES) * W + (2 * len(MODALITIES) - 1) * GAP


def _as_uint8(values: np.ndarray) -> np.ndarray:
    """Frames as the preview shows them: uint8 colours as they are, values in [-1, 1] by round((x + 1) * 127.5)."""
    if values.dtype == np.uint8:
        return values
    return np.round((np.clip(values.astype(np.float64), -1, 1) + 1) * 127.5).astype(np.uint8)


def _enlarged(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    return np.asarray(Image.fromarray(frame).resize((width, height), Image.Resampling.NEAREST))


def test_preview_files_show_source_and_reconstruction(built_cache, tmp_path):
    made = preview(built_cache, samples=2, out=tmp_path)
    assert made.dataset_indices == [0, 2]

    with av.open(str(made.video)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == T and frames[0].shape == (2 * H + GAP, _tile_width(), 3)
    with av.open(str(made.video)) as container:
        assert not container.streams.audio  # a cache without sound: a silent mp4

    # the mp4 is lossy: sample 2's last rgb reconstruction tile only resembles the exact one
    row = ManifestRow.from_json([json.loads(line) for line in (built_cache / "manifest.jsonl").read_text()
                                 .splitlines()][2])
    with h5py.File(built_cache / row.shard_path, "r") as shard:
        latent = torch.from_numpy(shard["perception_latent_state"][row.cache_row][None, :16].astype(np.float32))
    expected = _as_uint8(HaarTokenizer().decode(latent)[0].permute(1, 2, 3, 0).numpy()[T - 1])
    video_tile = frames[T - 1][H + GAP : 2 * H + GAP, W + GAP : 2 * W + GAP].astype(float)
    assert np.abs(video_tile - expected).mean() < 8


def test_preview_sheet_puts_each_source_above_its_reconstruction(built_cache, tmp_path):
    """The PNG, laid out as docs/stats.md says: per sample a title and a column-label line, then per modality a row
    of source frames above the same frames decoded, at the first frame, a third, two thirds and the last, each
    enlarged by a whole factor to at least MIN_TILE_HEIGHT. Every frame of it is checked against the sources re-read
    through the recorded config and the stored latents decoded here by the Haar tokenizer (PNG is lossless)."""
    made = preview(built_cache, samples=2, out=tmp_path)
    with Image.open(made.sheet) as image:
        assert image.format == "PNG"
        sheet = np.asarray(image.convert("RGB"))
    zoom = MIN_TILE_HEIGHT // H  # 4: 32-pixel frames shown 128 high
    tile_h, tile_w = H * zoom, W * zoom
    columns = [0, 3, 5, 8]  # round(p * (T - 1)) for p = 0, 1/3, 2/3, 1
    modality_h = 2 * tile_h + GAP
    sample_h = TITLE_HEIGHT + COLUMN_LABEL_HEIGHT + len(MODALITIES) * modality_h + (len(MODALITIES) - 1) * MODALITY_GAP
    assert sheet.shape == (2 * sample_h + SAMPLE_GAP, LABEL_WIDTH + len(columns) * tile_w + (len(columns) - 1) * GAP, 3)

    config = recorded_config(built_cache, Overrides())
    channels = {m["name"]: m["channels"] for m in json.loads((built_cache / "cache_config.json").read_text())
                ["latent"]["modalities"]}
    rows = [ManifestRow.from_json(json.loads(line)) for line in (built_cache / "manifest.jsonl").read_text()
            .splitlines()]
    for s, row in enumerate(rows[i] for i in made.dataset_indices):
        pixels, _ = recorded_pixels(row, SampleFinder(built_cache, config, False).sample(row), config)
        with h5py.File(built_cache / row.shard_path, "r") as shard:
            stored = shard["perception_latent_state"][row.cache_row].astype(np.float32)
        top = s * (sample_h + SAMPLE_GAP)
        assert (sheet[top : top + TITLE_HEIGHT] < 128).any()  # the title's ink
        for m, name in enumerate(MODALITIES):
            lo, hi = channels[name]
            decoded = HaarTokenizer().decode(torch.from_numpy(stored[None, lo:hi]))[0].permute(1, 2, 3, 0).numpy()
            source = _as_uint8(pixels.modalities[name].expanded())
            for r, (frames_of_row, tolerance) in enumerate(((source, 0), (_as_uint8(decoded), 1))):
                y = top + TITLE_HEIGHT + COLUMN_LABEL_HEIGHT + m * (modality_h + MODALITY_GAP) + r * (tile_h + GAP)
                assert (sheet[y : y + tile_h, :LABEL_WIDTH] < 128).any(), (name, r)  # its label
                for c, frame in enumerate(columns):
                    x = LABEL_WIDTH + c * (tile_w + GAP)
                    shown = sheet[y : y + tile_h, x : x + tile_w].astype(int)
                    want = _enlarged(frames_of_row[frame], tile_h, tile_w).astype(int)
                    assert np.abs(shown - want).max() <= tolerance, (row.sample_id, name, r, frame)
                    if c:  # the gap before it is blank
                        assert (sheet[y : y + tile_h, x - GAP : x] == BACKGROUND).all()
    # the source and reconstruction rows differ (the Haar cache is lossy in float16), so a swap would be seen
    y = TITLE_HEIGHT + COLUMN_LABEL_HEIGHT
    assert not np.array_equal(sheet[y : y + tile_h, LABEL_WIDTH:], sheet[y + tile_h + GAP : y + 2 * tile_h + GAP,
                                                                          LABEL_WIDTH:])


def test_cli_preview(built_cache, tmp_path, capsys):
    assert main(["preview", str(built_cache), "--index", "1", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "preview.mp4").stat().st_size > 0 and (tmp_path / "preview.png").is_file()
    out = capsys.readouterr().out
    assert "source | reconstruction" in out and "source above reconstruction" in out
    assert f"decoding {device_note(default_device())}\n" in out  # no --device: auto, and the line says which
