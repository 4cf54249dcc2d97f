"""A resume is refused, before any work, when the config, the inputs, the environment that encoded the staged units
or the holder of the lock differ."""

from __future__ import annotations

import json

import pytest

from helpers.builds import build_stopped_in_commit
from helpers.exec_world import exec_config, make_table
from helpers.media import pattern_frames, write_video
from helpers.tiny_diffusers_vaes import save_tiny_vae
from latentforge.builder.lock import BuildLock
from latentforge.builder.resume import check_config, check_inputs, resume_key
from latentforge.builder.run import build
from latentforge.builder.scan import scan
from latentforge.errors import LatentforgeError
from latentforge.executor import local
from latentforge.sinks.hdf5.integrity import verify_integrity
from latentforge.staging.staged_unit_writer import write_staged_unit
from latentforge.staging.staged_units import completed_units, read_staged_unit, sidecar_path


@pytest.fixture()
def built(tmp_path):
    table = make_table(tmp_path / "data", count=6)
    root = tmp_path / "cache"
    build(exec_config(table, root), quiet=True)
    return table, root


@pytest.fixture()
def staged(tmp_path):
    """A build stopped in its commit: its units staged, as the environment checks compare them."""
    table = make_table(tmp_path / "data", count=6)
    root = tmp_path / "cache"
    build_stopped_in_commit(exec_config(table, root))
    return table, root


def test_changed_config_is_refused_with_a_diff(built):
    table, root = built
    def records():
        return {p.name: p.stat().st_mtime_ns for p in (root / "build").iterdir()
                if not p.name.startswith("stats-") and p.name != "lock"}

    before = records()
    with pytest.raises(LatentforgeError) as error:
        build(exec_config(table, root, "frames.width=64", "output.storage_dtype=float32"), quiet=True)
    text = str(error.value)
    assert "different config" in text and "config.frames.width: 48 -> 64" in text
    assert "config.output.storage_dtype: 'float16' -> 'float32'" in text and "--overwrite" in text
    # the flags that give the staged build's values back, for a preset whose default moved or a mistyped flag
    assert "to resume it, give its values back: --set frames.width=48 --set output.storage_dtype=float16;" in text
    assert records() == before  # refused before any work: not even the plan was rewritten


# Every setting that changes a latent's bits, and the key the refusal names (haar ignores most of them, but the
# rule is the same for every tokenizer: a resume never mixes two encoders in one cache).
BIT_CHANGING = [
    ("tokenizer.precision=bf16", "config.tokenizer.precision: 'fp32' -> 'bf16'"),
    ("output.storage_dtype=float32", "config.output.storage_dtype: 'float16' -> 'float32'"),
    ("output.batch_size=2", "config.output.batch_size: 1 -> 2"),
]
# The Wan tokenizers' own keys that change the bits (their key of a resume is the one every tokenizer's is)
WAN_BIT_CHANGING = [
    ("tokenizer.temporal_window=16", "config.tokenizer.temporal_window: 4 -> 16"),
    ("tokenizer.max_gpu_mem_gib=12", "config.tokenizer.max_gpu_mem_gib: 24.0 -> 12.0"),
    ("tokenizer.conv_kernels=heuristics tokenizer.cudnn_benchmark=true",
     "config.tokenizer.cudnn_benchmark: False -> True"),  # autotuning replaces recorded plans, never joins them
    ("tokenizer.conv_kernels=heuristics", "config.tokenizer.conv_kernels: 'plans' -> 'heuristics'"),
]


@pytest.mark.parametrize("override,named", BIT_CHANGING)
def test_every_setting_that_changes_the_bits_is_refused_on_resume(built, override, named):
    table, root = built
    with pytest.raises(LatentforgeError) as error:
        build(exec_config(table, root, override), quiet=True)
    assert named in str(error.value)


def test_another_tokenizer_or_checkpoint_is_refused_on_resume(tmp_path):
    weights, other = tmp_path / "Wan2.1_VAE.pth", tmp_path / "other.pth"
    weights.write_bytes(b"the weights the build started with")
    other.write_bytes(b"other weights")
    wan = ["tokenizer.name=wan2.1", "tokenizer.precision=bf16", "frames.height=16", "frames.width=16"]
    started = exec_config(tmp_path / "t.csv", tmp_path / "cache", *wan, f"tokenizer.checkpoint={weights}")
    build_dir = tmp_path / "cache" / "build"
    check_inputs(build_dir, resume_key(started), {"version": 1, "count": 0, "sha256": "", "entries": {}})
    check_config(build_dir, resume_key(started))  # the same config resumes
    swapped = exec_config(tmp_path / "t.csv", tmp_path / "cache", *wan, f"tokenizer.checkpoint={other}")
    with pytest.raises(LatentforgeError, match=r"tokenizer_sha256: '[0-9a-f]{64}' -> '[0-9a-f]{64}'"):
        check_config(build_dir, resume_key(swapped))
    weights.write_bytes(b"other weights under the same name")  # the key holds the file's hash, not its path
    with pytest.raises(LatentforgeError, match=r"tokenizer_sha256: '[0-9a-f]{64}' -> '[0-9a-f]{64}'") as error:
        check_config(build_dir, resume_key(started))
    assert "config.tokenizer.checkpoint" not in str(error.value)
    with pytest.raises(LatentforgeError, match="config.tokenizer.name: 'wan2.1' -> 'haar-4x8x8'"):
        check_config(build_dir, resume_key(exec_config(tmp_path / "t.csv", tmp_path / "cache")))


def test_wan22_with_the_same_file_is_refused_on_resume_naming_the_tokenizer(tmp_path):
    weights = tmp_path / "Wan_VAE.pth"
    weights.write_bytes(b"one file, two tokenizer names")
    sizes = ["frames.height=32", "frames.width=48", f"tokenizer.checkpoint={weights}"]
    started = exec_config(tmp_path / "t.csv", tmp_path / "cache", "tokenizer.name=wan2.1", *sizes)
    build_dir = tmp_path / "cache" / "build"
    check_inputs(build_dir, resume_key(started), {"version": 1, "count": 0, "sha256": "", "entries": {}})
    wan22 = exec_config(tmp_path / "t.csv", tmp_path / "cache", "tokenizer.name=wan2.2", *sizes)
    with pytest.raises(LatentforgeError, match="(?s)config.tokenizer.name: 'wan2.1' -> 'wan2.2'.*--overwrite"):
        check_config(build_dir, resume_key(wan22))


def test_a_changed_tile_rule_is_refused_on_resume(tmp_path):
    """Spatial tiling of the diffusers-class VAEs changes the latent: its rule is part of the resume key."""
    weights = save_tiny_vae("hunyuanvideo", tmp_path / "hunyuanvideo-vae")
    tiled = ["tokenizer.name=hunyuanvideo", f"tokenizer.checkpoint={weights}", "tokenizer.tiling=spatial",
             "tokenizer.tile_size=32"]
    started = exec_config(tmp_path / "t.csv", tmp_path / "cache", *tiled, "tokenizer.tile_stride=16")
    build_dir = tmp_path / "cache" / "build"
    check_inputs(build_dir, resume_key(started), {"version": 1, "count": 0, "sha256": "", "entries": {}})
    check_config(build_dir, resume_key(started))  # the same rule resumes
    with pytest.raises(LatentforgeError, match=r"config.tokenizer.tile_stride: 16 -> 24"):
        check_config(build_dir, resume_key(exec_config(tmp_path / "t.csv", tmp_path / "cache", *tiled,
                                                       "tokenizer.tile_stride=24")))
    untiled = exec_config(tmp_path / "t.csv", tmp_path / "cache", *tiled[:2])
    with pytest.raises(LatentforgeError, match=r"(?s)config.tokenizer.tile_size: 32 -> None.*"
                                               r"config.tokenizer.tiling: 'spatial' -> 'off'"):
        check_config(build_dir, resume_key(untiled))


def _wan_started(tmp_path):
    """A Wan2.1 bf16 build's resume key recorded in tmp_path/wan/build, as a build records it before its units."""
    weights = tmp_path / "Wan2.1_VAE.pth"
    weights.write_bytes(b"the weights the build started with")
    wan = ["tokenizer.name=wan2.1", "tokenizer.precision=bf16", f"tokenizer.checkpoint={weights}"]
    started = exec_config(tmp_path / "t.csv", tmp_path / "wan", *wan)
    build_dir = tmp_path / "wan" / "build"
    check_inputs(build_dir, resume_key(started), {"version": 1, "count": 0, "sha256": "", "entries": {}})
    return wan, build_dir


@pytest.mark.parametrize("override,named", WAN_BIT_CHANGING)
def test_every_wan_setting_that_changes_the_bits_is_refused_on_resume(tmp_path, override, named):
    wan, build_dir = _wan_started(tmp_path)
    changed = exec_config(tmp_path / "t.csv", tmp_path / "wan", *wan, *override.split(" "))
    with pytest.raises(LatentforgeError) as error:
        check_config(build_dir, resume_key(changed))
    assert named in str(error.value)


def test_execution_settings_are_not_part_of_the_resume_key(built, tmp_path):
    table, root = built
    result = build(exec_config(table, root, "run.procs=2", "run.workers_per_gpu=1"), quiet=True)
    assert result.num_samples == 6
    # where builds share kernel plans is not either: a resumed build replays its own (build/conv_plans)
    wan, build_dir = _wan_started(tmp_path)
    check_config(build_dir, resume_key(exec_config(tmp_path / "t.csv", tmp_path / "wan", *wan,
                                                   f"tokenizer.conv_plans_dir={tmp_path / 'elsewhere'}")))
    # nor letting a CPU without bf16 instructions run the same function slowly
    check_config(build_dir, resume_key(exec_config(tmp_path / "t.csv", tmp_path / "wan", *wan,
                                                   "tokenizer.allow_slow_cpu_bf16=true")))
    # nor which carried book seeds the plans: the build's own book wins, and any plan it adds is recorded there
    check_config(build_dir, resume_key(exec_config(tmp_path / "t.csv", tmp_path / "wan", *wan,
                                                   f"tokenizer.conv_plans_file={tmp_path / 'other' / 'book.json'}")))


H200 = {"device_type": "cuda", "device_name": "NVIDIA H200", "cuda": "13.0", "cuda_driver": "13.0", "cudnn": "91200",
        "cudnn_heuristics": "B", "cudnn_frontend": "1.14.0", "triton": "3.6.0", "cutlass": "none",
        "torch": "2.11.0+cu130", "latentforge": "0.1.0"}
# Every field of the environment a GPU rank records that a resume can change (latentforge's version is in the
# resume key, refused with the config).
ENVIRONMENT_CHANGES = [("device_name", "NVIDIA A100-SXM4-80GB"), ("cuda", "12.8"), ("cuda_driver", "12.9"),
                       ("cudnn", "90800"), ("cudnn_heuristics", "A"), ("cudnn_frontend", "1.12.0"),
                       ("triton", "3.5.1"), ("cutlass", "4.2.0"), ("torch", "2.10.0+cu128")]


def _drop_last_unit(build_dir):
    """Remove the last staged unit, so a rerun has one to encode; returns its number."""
    unit, path = max(completed_units(build_dir).items())
    sidecar_path(path).unlink()
    path.unlink()
    return unit


def _staged_elsewhere(build_dir, environment):
    """The staged units rewritten as if encoded in `environment`, the last one dropped; returns its number."""
    last = _drop_last_unit(build_dir)
    for unit, path in completed_units(build_dir).items():
        old = read_staged_unit(path)
        write_staged_unit(build_dir, unit, old.rows, old.latents, old.text_embeddings, old.text_lengths, old.rejects,
                          {**old.encoded_by, "environment": environment})
    return last


@pytest.mark.parametrize("field,value", ENVIRONMENT_CHANGES)
def test_a_resume_in_another_environment_is_refused_naming_the_field(staged, monkeypatch, field, value):
    table, root = staged
    last = _staged_elsewhere(root / "build", H200)
    monkeypatch.setattr(local, "environment_record", lambda device, environ=None: {**H200, field: value})
    with pytest.raises(LatentforgeError) as error:
        build(exec_config(table, root), quiet=True)
    text = str(error.value)
    named = [line.strip() for line in text.splitlines() if line.startswith("  environment.")]
    assert named == [f"environment.{field}: staged {H200[field]!r} -> this run {value!r}"]
    assert "--overwrite" in text and "run.allow_mixed_environments=true" in text
    assert last not in completed_units(root / "build")  # refused before encoding


def test_a_resume_in_the_staged_units_environment_encodes_the_rest(staged):
    table, root = staged
    last = _drop_last_unit(root / "build")
    assert build(exec_config(table, root), quiet=True).num_samples == 6
    assert last in completed_units(root / "build")  # encoded, committed and retired with the others


def test_allowed_mixed_environments_resume_and_verify_warns(staged):
    table, root = staged
    _staged_elsewhere(root / "build", H200)
    assert build(exec_config(table, root, "run.allow_mixed_environments=true"), quiet=True).num_samples == 6
    report = verify_integrity(root)
    assert report.ok and [w.name for w in report.warnings] == ["encoded_by"]
    assert "2 environments" in report.warnings[0].detail and "NVIDIA H200" in report.warnings[0].detail


def test_changed_inputs_are_refused_with_counts(built):
    table, root = built
    data = table.parent
    (data / "videos" / "clip000.mp4").unlink()
    write_video(data / "videos" / "clip001.mp4", pattern_frames(9, 48, 32, seed=99))
    with open(table, "a", encoding="utf-8") as handle:
        handle.write("extra,videos/clip002.mp4,another caption\n")
    with pytest.raises(LatentforgeError) as error:
        build(exec_config(table, root), quiet=True)
    assert "inputs changed" in str(error.value) and "1 added, 0 removed, 2 changed" in str(error.value)


def test_concurrent_build_is_refused(built):
    table, root = built
    with BuildLock(root / "build"):
        with pytest.raises(LatentforgeError, match="another build is running on this cache"):
            build(exec_config(table, root), overwrite=True, quiet=True)
    assert (root / "_CACHE_COMPLETE").exists()  # --overwrite did not touch a cache another build holds


def test_scan_writes_rejects_and_estimates(tmp_path):
    table = make_table(tmp_path / "data", count=4, rows=[{"id": "zz_text", "video": "notes.mp4", "caption": "x"}])
    (tmp_path / "data" / "notes.mp4").write_text("not a video\n")
    result = scan(exec_config(table, tmp_path / "cache"), calibrate=1, quiet=True)
    assert (result.planned, result.accepted, result.rejects_by_reason) == (5, 4, {"unreadable": 1})
    rows = [json.loads(line) for line in result.rejects_path.read_text().splitlines()]
    assert [(r["sample_id"], r["reason"]) for r in rows] == [("zz_text", "unreadable")]
    assert result.disk_ok and result.output_bytes > 4 * 16 * 3 * 4 * 6 * 2
    assert result.encode_seconds_per_sample > 0
    assert not (tmp_path / "cache" / "rejects.jsonl").exists()  # the cache's own file is commit's alone
