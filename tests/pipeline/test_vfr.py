"""Variable-frame-rate sources are flagged: in the probe (VideoInfo.vfr), in the row's provenance and in one note."""

from __future__ import annotations

import numpy as np

from helpers.media import pattern_frames, write_video
from latentforge.decode.stream_probe import probe_video
from latentforge.pipeline.probe import ProbeResult, vfr_notice
from latentforge.records import Sample, SourceEntry


def test_uneven_timestamps_are_vfr_and_even_ones_are_not(tmp_path):
    frames = pattern_frames(12, 64, 48)
    even = write_video(tmp_path / "even.mp4", frames, fps=30)
    uneven = write_video(tmp_path / "uneven.mp4", frames, pts_ms=[0, 33, 67, 100, 200, 233, 267, 400, 433, 467,
                                                                    500, 533])
    mkv = write_video(tmp_path / "even.mkv", frames, fps=30)  # 1 ms ticks: durations of 33 and 34 ms
    assert not probe_video(str(even), "e").vfr
    assert not probe_video(str(mkv), "m").vfr
    info = probe_video(str(uneven), "u")
    assert info.vfr
    assert np.allclose(info.pts, np.array([0, 33, 67, 100, 200, 233, 267, 400, 433, 467, 500, 533]) / 1000)


def test_notice_counts_each_vfr_video_once(tmp_path):
    frames = pattern_frames(8, 64, 48)
    even = write_video(tmp_path / "even.mp4", frames, fps=30)
    uneven = write_video(tmp_path / "uneven.mp4", frames, pts_ms=[0, 33, 67, 200, 233, 267, 400, 433])
    samples, probes = [], {}
    for index, (path, start) in enumerate([(uneven, 0), (uneven, 2), (even, 0)]):
        entry = SourceEntry(key=path.stem, video=str(path), video_rel=path.name, caption="c")
        samples.append(Sample(sample_id=f"{path.stem}@{start}", source_index=index, entry=entry, start_frame=start))
        probes[index] = ProbeResult(info=probe_video(str(path), "x"), window=None, plan=None, caption="c")
    notice = vfr_notice(samples, probes)
    assert notice is not None and notice.startswith("1 source video(s) have a variable frame rate (e.g. uneven.mp4)")
    assert vfr_notice(samples[2:], probes) is None
