"""The packed per-frame numbers of probe results read, compare, hash and pickle as the tuples they replace, and a
probe result's frame times and window are packed however it was made (probed, built by hand, read back)."""

from __future__ import annotations

import bisect
import pickle
import tracemalloc

import pytest

from latentforge.packed_numbers import PackedFloats, PackedInts
from latentforge.records import VideoInfo
from latentforge.transforms.window import FrameWindow

TIMES = (0.0, 1 / 30, 2 / 30, 0.1, 0.1 + 1e-9, 7.25)
INDICES = (0, 1, 2, 300, 2**40, -3)


@pytest.mark.parametrize(("kind", "values"), [(PackedFloats, TIMES), (PackedInts, INDICES)])
def test_reads_like_the_tuple_of_its_values(kind, values):
    packed = kind(values)
    assert len(packed) == len(values) and list(packed) == list(values)
    every = range(-len(values), len(values))
    assert [packed[i] for i in every] == [values[i] for i in every]
    assert packed[1:4] == values[1:4] and packed[::-2] == values[::-2] and packed[5:1] == ()
    assert packed == values and values == packed and hash(packed) == hash(values)
    assert packed != values[:-1] and packed != list(values)  # a list is no tuple, as for tuples
    with pytest.raises(IndexError):
        packed[len(values)]
    assert repr(packed) == repr(values)
    assert pickle.loads(pickle.dumps(packed)) == packed
    assert type(pickle.loads(pickle.dumps(packed))) is kind


def test_floats_keep_every_bit_and_bisect_as_the_tuple():
    times = tuple(k / 29.97 for k in range(500))
    packed = PackedFloats(times)
    assert all(a.hex() == b.hex() for a, b in zip(packed, times))
    for probe in (-1.0, 0.0, 3.3366700033366704, 8.0, 16.65, 99.0):
        assert bisect.bisect_right(packed, probe) == bisect.bisect_right(times, probe)


def test_probe_records_pack_their_frame_times_and_windows():
    info = VideoInfo(64, 48, 0, 30.0, TIMES, "h264", "yuv420p", False)
    window = FrameWindow((0, 1, 2), TIMES[:3])
    assert isinstance(info.pts, PackedFloats) and info.pts == TIMES and info.num_frames == len(TIMES)
    assert isinstance(window.indices, PackedInts) and isinstance(window.timestamps, PackedFloats)
    again = pickle.loads(pickle.dumps((info, window)))
    assert again == (info, window) and hash(again[0]) == hash(info)
    assert isinstance(again[0].pts, PackedFloats) and again[1].start_frame == 0


def test_a_window_read_back_holds_8_bytes_a_number():
    """What a build holds per window once its probe result came back from a probe process: about 2 KB for 93 frames
    (tuples of Python numbers held over 6 KB: 32 bytes a float or large int)."""
    blob = pickle.dumps([FrameWindow(tuple(range(1000 + k, 1093 + k)), tuple((1000 + k + i) / 30 for i in range(93)))
                         for k in range(200)])
    tracemalloc.start()
    try:
        windows = pickle.loads(blob)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(windows) == 200 and held / 200 < 3000
