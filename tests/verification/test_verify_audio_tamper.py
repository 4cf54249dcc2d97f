"""Deep verify of a cache's sound: one stored PCM value or one audio latent value moved by one ulp with h5py after
the build (SHA256SUMS rewritten, so integrity passes) fails the named check at that sample and no other check."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest

from helpers.audio_media import tone_after, write_clip_with_audio
from helpers.builds import build_quietly, read_manifest, tiny_config, write_table
from helpers.tiny_audio_vae import tiny_audio_vae
from latentforge.cache.checksums import write_sha256sums
from latentforge.cli.main import main
from latentforge.sinks.hdf5.integrity import verify_integrity
from latentforge.verification.deep import verify_deep

TAMPERED = 1  # the dataset_index altered


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Two stereo clips with tones built with the audio latent of a tiny LTX-2 audio VAE."""
    folder = tmp_path_factory.mktemp("audio-tamper")
    vae = tiny_audio_vae(folder / "ltx2")
    rows = [{"id": name, "video": write_clip_with_audio(folder / f"{name}.mov",
                                                        audio=tone_after(onset, 16000, 1.0, channels=2)).name,
             "caption": name, "objects": 1} for name, onset in (("early", 0.05), ("later", 0.15))]
    root = folder / "cache"
    build_quietly(tiny_config(write_table(rows, folder / "table.csv"), root, modalities=("rgb",),
                              overrides=("frames.fps=24", "audio.enabled=true", "audio.channels=2",
                                         "audio.tokenizer=ltx2-audio", f"audio.checkpoint={vae}")))
    assert verify_deep(root, spot=2).ok
    return root


@pytest.fixture
def cache(built, tmp_path):
    root = tmp_path / "cache"
    shutil.copytree(built, root)
    return root


def one_ulp_up(root, dataset: str, at: tuple[int, ...]) -> None:
    """Move one value of dataset_index TAMPERED's row by one ulp, then reseal the cache as a buggy build would."""
    row = read_manifest(root)[TAMPERED]
    with h5py.File(root / row["shard_path"], "r+") as shard:
        value = shard[dataset][(row["cache_row"], *at)]
        shard[dataset][(row["cache_row"], *at)] = np.nextafter(value, np.float32(np.inf), dtype=np.float32)
    write_sha256sums(root)
    assert verify_integrity(root).ok


def failures(report) -> dict[str, list]:
    assert not report.ok
    found: dict[str, list] = {}
    for check in report.failures:
        found.setdefault(check.name, []).append(check.dataset_index)
    return found


def test_one_pcm_value_altered(cache, capsys):
    one_ulp_up(cache, "audio", (3000, 1))  # right channel, within the tone
    report = verify_deep(cache, spot=2)
    assert failures(report) == {"audio": [TAMPERED]}  # the latent is compared with the fresh PCM's: still equal
    assert report.failures[0].detail == f"dataset_index {TAMPERED}: audio differs from the window decoded again"
    assert main(["verify", str(cache), "--deep", "--spot", "2"]) != 0
    assert f"dataset_index {TAMPERED}: audio differs" in capsys.readouterr().out


def test_one_audio_latent_value_altered(cache):
    one_ulp_up(cache, "audio_latent", (0, 0, 0))
    report = verify_deep(cache, spot=2)
    assert failures(report) == {"audio_latent": [TAMPERED]}
    detail = report.failures[0].detail
    assert detail.startswith(f"dataset_index {TAMPERED}: the audio latent differs from the re-encode by up to ")
