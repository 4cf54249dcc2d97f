"""The run stats say why an encoder waited for decoded samples, with numbers a user can act on."""

from __future__ import annotations

from latentforge.executor.input_waits import explain_input_waits
from latentforge.executor.rank_stats import RankStats
from latentforge.executor.worker_sizing import decode_workers, rank_torch_threads


def _stats(workers: int, **seconds: float) -> RankStats:
    return RankStats(rank=0, pid=1, device="cuda:0", workers=workers, samples=100, seconds=dict(seconds))


def test_no_sentence_when_the_encoder_barely_waited():
    assert explain_input_waits(_stats(4, encode=100.0, encoder_wait=1.0, decode=300.0), 16, "swscale") == ""


def test_too_few_workers_names_the_count_that_keeps_up():
    # 3 s to decode a sample on one worker, 2 workers -> one every 1.5 s; the encoder takes 0.5 s.
    said = explain_input_waits(_stats(2, encode=50.0, encoder_wait=100.0, encoder_wait_first=2.0, decode=300.0), 16,
                               "swscale")
    assert "decode is the bottleneck" in said and "run.workers_per_gpu=7" in said and "16 cores" in said
    assert "67 % of its time" in said and "resize_backend" not in said  # 7 workers fit on 16 cores


def test_start_up_waits_and_inline_decoding_are_told_apart():
    said = explain_input_waits(_stats(8, encode=100.0, encoder_wait=10.0, encoder_wait_first=9.0, decode=200.0), 16,
                               "swscale")
    assert "before the first sample" in said and "bottleneck" not in said
    inline = explain_input_waits(_stats(0, encode=100.0, encoder_wait=50.0), 16, "swscale")
    assert "run.workers_per_gpu=0" in inline


def test_a_gpu_build_short_of_cores_is_pointed_to_the_device_resize():
    # 1.5 s per sample on one worker, the encoder 0.1 s: 16 workers would keep up, the host has 8 cores.
    starved = _stats(6, encode=10.0, encoder_wait=20.0, encoder_wait_first=1.0, decode=150.0)
    said = explain_input_waits(starved, 8, "swscale")
    assert "run.workers_per_gpu=16" in said and "frames.resize_backend=device" in said
    assert "frames.resize_backend" not in explain_input_waits(starved, 8, "device")
    on_cpu = RankStats(rank=0, pid=1, device="cpu", workers=6, samples=100, seconds=dict(starved.seconds))
    assert "frames.resize_backend" not in explain_input_waits(on_cpu, 8, "swscale")


def test_auto_workers_follow_the_cores_per_gpu():
    assert decode_workers("auto", "cuda:0", ranks_on_host=1, cores=16) == 8  # capped
    assert decode_workers("auto", "cuda:0", ranks_on_host=8, cores=32) == 3  # 4 cores per GPU, one for the rank
    assert decode_workers("auto", "cuda:0", ranks_on_host=4, cores=4) == 1  # never none on a GPU
    assert decode_workers("auto", "cpu", ranks_on_host=1, cores=2) == 1
    assert decode_workers("auto", "cpu", ranks_on_host=2, cores=2) == 0
    assert decode_workers("5", "cuda:0", ranks_on_host=1, cores=2) == 5


def test_rank_torch_threads_leave_the_cores_to_the_decode_workers():
    assert rank_torch_threads("cuda:0", ranks_on_host=8, workers=3, cores=32) == 1
    assert rank_torch_threads("cuda:0", ranks_on_host=1, workers=0, cores=16) is None  # it decodes itself
    assert rank_torch_threads("cpu", ranks_on_host=1, workers=1, cores=16) is None
    assert rank_torch_threads("cpu", ranks_on_host=4, workers=0, cores=16) == 4
    assert rank_torch_threads("cpu", ranks_on_host=4, workers=0, cores=2) == 1
