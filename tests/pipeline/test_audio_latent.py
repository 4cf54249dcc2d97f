"""The audio latent in a build (docs/audio.md): a tiny LTX-2 audio VAE encodes each window's stored PCM, stored as
`audio_latent` in both sinks and returned by both Datasets, its fingerprint in cache_config.json and the resume key,
and `verify --deep` encodes the sound again and finds it equal bit for bit."""

from __future__ import annotations

import json

import numpy as np
import torch

from helpers.audio_media import tone_after, write_clip_with_audio
from helpers.builds import build_quietly, read_manifest, tiny_config, write_table
from helpers.tiny_audio_vae import tiny_audio_vae
from latentforge import LatentCacheDataset, StreamingLatentDataset, verify
from latentforge.builder.resume import resume_key
from latentforge.tokenizers.ltx.ltx2_audio import LTX2AudioTokenizer


def test_a_build_stores_the_audio_latent_and_deep_verify_reencodes_it(tmp_path):
    vae = tiny_audio_vae(tmp_path / "ltx2")
    clip = write_clip_with_audio(tmp_path / "tone.mov", audio=tone_after(0.1, 16000, 1.0, channels=2))
    table = write_table([{"id": "tone", "video": clip.name, "caption": "a tone", "objects": 1}], tmp_path / "t.csv")
    audio = ("frames.fps=24", "audio.enabled=true", "audio.channels=2", "audio.tokenizer=ltx2-audio",
             f"audio.checkpoint={vae}")
    for sink in ("hdf5", "webdataset"):
        root = tmp_path / sink
        config = tiny_config(table, root, modalities=("rgb",), overrides=(*audio, f"output.sink={sink}"))
        build_quietly(config)
        recorded = json.loads((root / "cache_config.json").read_text())["audio"]
        [stream] = [s for s in recorded["streams"] if s["name"] == "audio_latent"]
        assert stream["producer"]["name"] == "ltx2-audio" and stream["producer"]["mel"]["n_fft"] == 1024
        [item] = (list(LatentCacheDataset(root)) if sink == "hdf5" else list(StreamingLatentDataset(root)))
        tokenizer = LTX2AudioTokenizer.from_config(config.audio, "cpu")
        expected = tokenizer.encode(torch.as_tensor(np.asarray(item["audio"]))[None])[0]
        assert tuple(item["audio_latent"].shape) == tuple(stream["shape"]) == tuple(expected.shape)
        assert torch.equal(torch.as_tensor(np.asarray(item["audio_latent"])), expected)
        deep = sink == "hdf5"  # deep verify reads HDF5 caches only
        report = verify(root, deep=deep)
        assert report.ok, [c for c in report.checks if not c.ok]
        assert any(c.name == "audio_latent" and c.ok for c in report.checks) == deep
    assert read_manifest(tmp_path / "hdf5")[0]["provenance"]["audio"]["present"]
    key = resume_key(config)
    assert key["audio_tokenizer_sha256"] == LTX2AudioTokenizer.checkpoint_digest(str(vae))
    assert "sha256" not in key["config"]["audio"] and key["config"]["audio"]["tokenizer"] == "ltx2-audio"
