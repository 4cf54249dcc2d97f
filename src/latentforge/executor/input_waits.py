"""Why a rank's encoder waited for decoded samples, in words, from its clocks (run stats: `input_waits`).

The encoder waits when its next sample is not decoded yet. Waits at the start (workers starting, the first
decodes) are expected; steady waits mean decode cannot keep up: a sample takes `d` seconds on one worker,
W workers deliver one every d / W seconds, and the encoder needs one every `e` seconds, so W >= d / e
keeps it busy (one more absorbs the variation between sources).
"""

from __future__ import annotations

import math

from .rank_stats import RankStats

# Waits under this share of the encoder's time are not worth a sentence.
NOTEWORTHY_SHARE = 0.02


def explain_input_waits(stats: RankStats, cores: int, resize_backend: str) -> str:
    """One sentence, or "" when the encoder (almost) never waited. resize_backend: the build's
    frames.resize_backend, for the advice when more workers would not fit on the host's cores."""
    seconds = stats.seconds
    waited, first = seconds.get("encoder_wait", 0.0), seconds.get("encoder_wait_first", 0.0)
    busy = seconds.get("encode", 0.0) + seconds.get("text", 0.0)
    samples = stats.samples
    if samples == 0 or waited <= NOTEWORTHY_SHARE * (busy + waited):
        return ""
    said = [f"the encoder waited {waited:.1f} s for decoded samples ({100 * waited / (busy + waited):.0f} % of its "
            "time)"]
    if stats.workers == 0:
        return said[0] + ": it decoded every sample itself (run.workers_per_gpu=0); give it decode workers"
    if first >= 0.5 * waited:
        said.append(f"{first:.1f} s of it before the first sample (decode workers starting, the first decodes)")
    decode_each, encode_each = seconds.get("decode", 0.0) / samples, busy / samples
    needed = math.ceil(decode_each / encode_each) + 1 if encode_each > 0 else stats.workers
    if needed > stats.workers:
        said.append(f"decode is the bottleneck: a sample takes {decode_each:.2f} s on one decode worker, "
                    f"{stats.workers} workers deliver one every {decode_each / stats.workers:.2f} s and the encoder "
                    f"takes {encode_each:.2f} s: run.workers_per_gpu={needed} would keep up (this host has "
                    f"{cores} cores)")
        if needed > cores and resize_backend != "device" and stats.device.startswith("cuda"):
            said.append("that is more workers than cores: frames.resize_backend=device moves the colour conversion "
                        "and resize to the GPU, about a third of the decode CPU for 720p sources (docs/frames.md)")
    elif first < 0.5 * waited:
        said.append(f"{stats.workers} workers keep up on average ({decode_each:.2f} s per sample on one, the "
                    f"encoder {encode_each:.2f} s), so the waits came in bursts: sources that decode slowly, or a "
                    "host whose cores are busy with other work")
    return "; ".join(said)
