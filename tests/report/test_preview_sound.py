"""`preview` of a cache with sound: each previewed window's stored PCM as an audio track of the mp4, read back with
PyAV: its codec, rate, channels and length, and a tone's onset where the stored PCM has it."""

from __future__ import annotations

import av
import h5py
import numpy as np

from helpers.audio_media import tone_after, write_clip_with_audio
from helpers.builds import build_quietly, read_manifest, tiny_config, write_table
from latentforge.report.preview import preview, write_mp4
from latentforge.report.preview_sound import Sound

RATE = 16000
AAC_FRAME = 1024  # samples per AAC frame
LOUD = 0.1  # a fifth of the tone's amplitude: above AAC's pre-echo, the smear of an attack into the silence before it


def onset(pcm: np.ndarray) -> int:
    return int(np.flatnonzero(np.abs(pcm) > LOUD)[0])


def test_each_window_sound_is_a_track_beside_its_frames(tmp_path):
    # 24 fps sources taken at 12 fps: the frames must play at 12 fps to last as long as their sound
    clips = {"tone": write_clip_with_audio(tmp_path / "tone.mov", audio=tone_after(0.2, RATE, 1.0)),
             "late": write_clip_with_audio(tmp_path / "late.mov", audio=tone_after(0.0, RATE, 0.9, start=0.1),
                                           audio_start=0.1)}
    table = write_table([{"id": name, "video": path.name, "caption": name, "objects": 1}
                         for name, path in clips.items()], tmp_path / "table.csv")
    root = tmp_path / "cache"
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=("frames.fps=12", "audio.enabled=true")))
    rows = read_manifest(root)
    assert [row["dataset_index"] for row in rows] == [0, 1]
    stored = []
    for row in rows:
        with h5py.File(root / row["shard_path"]) as shard:
            length = int(shard["audio_length"][row["cache_row"]][0])
            stored.append(shard["audio"][row["cache_row"]][:length, 0])
    assert [len(pcm) for pcm in stored] == [round(9 / 12 * RATE)] * 2

    made = preview(root, samples=2, out=tmp_path / "preview")
    assert made.dataset_indices == [0, 1]
    with av.open(str(made.video)) as container:
        video = container.streams.video[0]
        assert video.average_rate == 12 and video.frames == 9
        # mp4 keeps a track's title in its `name` box
        assert [track.metadata["name"] for track in container.streams.audio] == \
            ["dataset_index 0", "dataset_index 1"]
        for track in container.streams.audio:
            context = track.codec_context
            assert (context.name, context.sample_rate, context.channels) == ("aac", RATE, 1)
    for index, pcm in enumerate(stored):
        with av.open(str(made.video)) as container:
            track = container.streams.audio[index]
            assert abs(float(track.duration * track.time_base) - len(pcm) / RATE) <= AAC_FRAME / RATE
            frames = list(container.decode(track))
        assert frames[0].time == 0.0  # with the first video frame
        heard = np.concatenate([frame.to_ndarray()[0] for frame in frames])
        assert abs(len(heard) - len(pcm)) <= AAC_FRAME
        assert abs(onset(heard) - onset(pcm)) <= 2, rows[index]["sample_id"]
    # the tracks differ where their tones begin: sin(2 pi 440 t) passes 0.2 two samples after each onset
    assert {row["sample_id"]: onset(pcm) for row, pcm in zip(rows, stored)} == \
        {"tone": round(0.2 * RATE) + 2, "late": round(0.1 * RATE) + 2}


def test_a_rate_aac_does_not_take_is_stored_as_16_bit_pcm(tmp_path):
    pcm = np.stack([np.linspace(-1.2, 1.2, 1500, dtype=np.float32), np.full(1500, 0.25, np.float32)], axis=1)
    path = write_mp4(tmp_path / "odd.mp4", np.zeros((3, 16, 16, 3), np.uint8), 8.0, [Sound(pcm, 1000, "odd")])
    with av.open(str(path)) as container:
        track = container.streams.audio[0]
        assert (track.codec_context.name, track.codec_context.sample_rate, track.codec_context.channels) == \
            ("pcm_s16le", 1000, 2)
        heard = np.concatenate([frame.to_ndarray() for frame in container.decode(track)], axis=1)
    assert np.array_equal(heard.reshape(-1, 2), np.clip(np.rint(pcm * 32768), -32768, 32767))  # FFmpeg rounds and clips
