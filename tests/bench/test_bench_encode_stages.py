"""bench/encode/encode_stages.py --tiny: every layer of the fast encoder gets its time, work and floor, on the CPU."""

import importlib.util
import json
import sys

from helpers import REPO

BENCH = REPO / "bench" / "encode" / "encode_stages.py"


def test_every_layer_is_charged_and_the_parts_add_up(tmp_path, capsys):
    sys.path.insert(0, str(BENCH.parent))  # the bench imports its sibling modules
    spec = importlib.util.spec_from_file_location("bench_encode_stages", BENCH)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(bench)
    out = tmp_path / "stages.json"
    assert bench.main(["--tiny", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    layers = {row["layer"].split()[1]: row for row in result["layers"] if row["layer"][0].isdigit()}
    # Wan2.1's encoder: every kind of layer shows up, each convolution-bearing one with its convolutions' time,
    # FLOPs and the same convolutions timed alone
    assert set(layers) == {"conv_in", "resblock", "down2d", "down3d", "attention", "head", "quant"}
    for kind in ("conv_in", "resblock", "down2d", "down3d", "head", "quant"):
        assert layers[kind]["conv_s"] > 0 and layers[kind]["gflop"] > 0 and layers[kind]["conv_alone_s"] > 0
    assert layers["resblock"]["norm_s"] > 0 and layers["attention"]["other_s"] > 0
    # the rows split one instrumented encode: they add up to it; the work counted from the convolutions as they
    # ran is near the architecture's count (encode.py's encoder_flops; the stacked first conv multiplies 16 input
    # channels of which 9 hold data, and the attention is no convolution): 99.4 % of it at 93x480x832, 102.6 % here
    total = sum(row["total_s"] for row in result["layers"])
    assert abs(total - result["instrumented_s"]) < 1e-9
    assert 0.95 * result["encoder_tflop"] < result["counted_tflop"] < 1.05 * result["encoder_tflop"]
    assert "floor" in capsys.readouterr().out
