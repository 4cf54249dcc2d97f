"""bench/build/audio.py --tiny: the same build over clips with an AAC track, video only and with the window's audio
and its ltx2-audio latent (a shrunk random VAE), each measured; the audio build's shards hold the audio arrays."""

from __future__ import annotations

import h5py
import pytest

from helpers.bench_scripts import run_tiny

pytestmark = pytest.mark.slow  # two latentforge processes


def test_audio_bench_runs_tiny(tmp_path):
    report = run_tiny("build/audio", tmp_path, "--work", str(tmp_path / "work"))
    builds = report["builds"]
    assert set(builds) == {"video", "video+audio"}
    assert all(row["exit_code"] == 0 and row["units_staged"] == 4 and not row["rejects"] for row in builds.values())
    shards = {name: sorted((tmp_path / "work" / "caches" / name / "shards").glob("*.h5")) for name in builds}
    with h5py.File(shards["video+audio"][0]) as with_audio, h5py.File(shards["video"][0]) as video_only:
        assert {"audio", "audio_latent"} <= set(with_audio) and "audio" not in video_only
        assert with_audio["audio"].shape[0] == with_audio["video_latent_state"].shape[0]
