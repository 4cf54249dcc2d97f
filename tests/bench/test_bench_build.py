"""bench/build/build.py --tiny runs every phase of the GPU benchmark on the CPU, as one command."""

import contextlib
import filecmp
import importlib.util
import io
import json
import subprocess
import sys

import av
import h5py
import numpy as np
import pytest
from PIL import Image

from helpers import REPO
from helpers.golden import canonical_bytes, text_key, valid_text

pytestmark = pytest.mark.slow  # a long end-to-end run; -m 'not slow' leaves it out

BENCH = REPO / "bench" / "build" / "build.py"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-build")
    # the script's main() here (as tests/bench/test_bench_encode.py runs its bench): the builds it measures are
    # `latentforge build` processes either way; what it prints is collected for the checks
    spec = importlib.util.spec_from_file_location("bench_build", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        code = bench.main(["--tiny", "--out", str(out)])
    assert code == 0, printed.getvalue()[-3000:] + errors.getvalue()[-3000:]
    return out, json.loads((out / "build-bench.json").read_text()), printed.getvalue()


def test_every_phase_ran_and_printed(tiny):
    out, result, stdout = tiny
    assert result["errors"] == {}
    assert set(result["phases"]) == {"prepare", "cpu", "pure", "t5", "perception", "rgb", "rgb_device", "long",
                                     "scaling", "sha"}
    assert "samples/s" in stdout and "subset shards" in stdout


def test_the_long_phase_builds_windows_inside_detected_shots(tiny):
    out, result, stdout = tiny
    long = result["phases"]["long"]
    assert long["exit_code"] == 0 and long["dataset_exhausted"]
    rows = [json.loads(line) for line in (out / "work" / "caches" / "long" / "manifest.jsonl").read_text().splitlines()]
    shots = {row["sample_id"].split("@")[0] for row in rows}
    # 4 s of 1 s shots: several shots, each giving windows (ids <video>#shot<k>@<start frame>)
    assert len(shots) >= 3 and all("#shot" in shot for shot in shots) and len(rows) > len(shots)
    assert any(line.startswith("long ") for line in stdout.splitlines())


def test_dataset_is_h264_with_png_masks_and_npz_depth(tiny):
    out, _, _ = tiny
    dataset = out / "work" / "dataset"
    with av.open(str(dataset / "videos" / "clip_0000.mp4")) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
        assert stream.codec_context.name == "h264"
    assert len(frames) == 20 and frames[0].shape == (64, 96, 3)
    masks = sorted((dataset / "masks" / "clip_0000").glob("*.png"))
    assert len(masks) == 20
    ids = np.unique(np.stack([np.asarray(Image.open(m)) for m in masks]))
    assert set(ids.tolist()) <= {0, 1, 2, 3} and len(ids) > 1
    with np.load(dataset / "depth" / "clip_0000.npz") as archive:
        assert archive["depth"].shape == (20, 64, 96) and archive["depth"].dtype == np.float32


def test_subset_shards_equal_and_match_what_the_runs_staged(tiny):
    out, result, _ = tiny
    caches = out / "work" / "caches"
    sha = result["phases"]["sha"]
    for n in (1, 2):
        checked = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=caches / f"subset-{n}")
        assert checked.returncode == 0
    one, two = (sorted((caches / f"subset-{n}" / "shards").glob("*.h5")) for n in (1, 2))
    assert [p.name for p in one] == [p.name for p in two]
    if not sha["all_shards_equal"]:  # only the CPU text encoder's rounding by thread count may differ
        _assert_equal_but_text_rounding(caches / "subset-1", caches / "subset-2", one)
    assert sha["all_shards_equal"] == all(filecmp.cmp(a, b, shallow=False) for a, b in zip(one, two))
    # the committed rows are the latents the 2-process run encoded (units 0 and 1), not a re-encode: its staged units,
    # or, when it ran to its end and its commit retired them, the rows its own cache holds for the same samples
    source = caches / "perception-2gpu"
    with h5py.File(one[0], "r") as shard:
        rows, indices = shard["perception_latent_state"][:], shard["source_index"][:].tolist()
    staged = [source / "build" / "staging" / f"unit-{unit:06d}.h5" for unit in (0, 1)]
    if all(path.is_file() for path in staged):
        encoded = []
        for path in staged:
            with h5py.File(path, "r") as handle:
                encoded.append(handle["latents"][:])
        np.testing.assert_array_equal(rows, np.concatenate(encoded))
    else:
        where = {row["source_index"]: row for row in map(json.loads, (source / "manifest.jsonl").open())}
        for row, index in zip(rows, indices):
            with h5py.File(source / where[index]["shard_path"], "r") as handle:
                np.testing.assert_array_equal(row, handle["perception_latent_state"][where[index]["cache_row"]])


def _assert_equal_but_text_rounding(first, second, shards) -> None:
    """Every byte of `second`'s shards equals `first`'s once its text values, within one float16 step of `first`'s
    (helpers.golden's text tolerance), are replaced by them: a CPU's matmuls may round by thread count (the ranks
    of 1 and 2 processes get 2 and 1 torch threads), and nothing else may differ."""
    config = json.loads((first / "cache_config.json").read_text(encoding="utf-8"))
    text = config["text"]
    assert text["source"] == "encoder"
    for path in shards:
        name = str(path.relative_to(first))
        golden = {text_key(name, text["embeddings_dataset"]): valid_text(path, text)[0]}
        assert canonical_bytes(second, name, config, golden) == path.read_bytes(), name


def test_steady_rate_is_the_least_squares_slope_of_staged_samples(tiny):
    out, result, _ = tiny
    run = json.loads((out / "logs" / "perception.run.json").read_text())
    times = np.array([e[0] for e in run["events"]])
    cumulative = np.cumsum([e[2] for e in run["events"]])
    slope = np.polyfit(times - times[0], cumulative, 1)[0]
    steady = result["phases"]["perception"]["steady"]
    assert steady["samples_per_s"] == pytest.approx(slope, rel=1e-9)
    assert len(run["events"]) == 4  # 8 rows in units of 2
    for build in ("perception", "rgb"):
        (rank,) = result["phases"][build]["ranks"]
        assert rank["samples"] == 8 and rank["encoder_wait_s_per_sample"] is not None


def test_pure_encode_and_text_report_consistent_rates(tiny):
    _, result, _ = tiny
    pure = result["phases"]["pure"]
    assert pure["samples_per_s_rgb"] > pure["samples_per_s_all_modalities"] > 0
    t5 = result["phases"]["t5"]
    assert t5["prompts"] == 8 and t5["d_model"] == 1024
    assert t5["reference_s_per_distinct"] > 0 and t5["per_prompt_s_per_distinct"] > 0 and t5["build_s_per_sample"] > 0
    assert t5["max_rel_l2_vs_reference"] < 1e-5 and t5["tokens_per_prompt"] > 1  # fp32: rounding only


def test_t5_11b_architecture_loads_through_the_build_text_encoder(tmp_path):
    """The GPU model's config (one layer here) saved in bf16 and read back by transformers and latentforge."""
    sys.path.insert(0, str(BENCH.parent))
    try:
        import _build_data
    finally:
        sys.path.remove(str(BENCH.parent))
    from safetensors import safe_open
    from transformers import T5Config

    from latentforge.text.t5 import T5TextEncoder

    folder = _build_data.make_text_model(tmp_path / "t5", ["a red ball rolls", "a blue cube"], "cpu", True, layers=1)
    config = T5Config.from_pretrained(folder)
    shape = (config.d_model, config.d_ff, config.num_heads, config.d_kv, config.vocab_size)
    assert shape == (1024, 65536, 128, 128, 32128)
    assert config.feed_forward_proj == "relu"
    with safe_open(next(folder.glob("*.safetensors")), "pt") as weights:
        assert weights.get_tensor("shared.weight").dtype.is_floating_point
        assert str(weights.get_tensor("shared.weight").dtype) == "torch.bfloat16"
    encoder = T5TextEncoder(str(folder), precision="bf16", max_length=16)
    batch = encoder.encode(["a red ball rolls"])
    assert batch.embeddings.shape == (1, 16, 1024) and np.isfinite(batch.embeddings).all()
    assert "untrained random bf16" in encoder.provenance_note
