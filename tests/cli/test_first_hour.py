"""A new user's mistakes, fed to `latentforge`: each ends with its documented exit code and one line naming the
value and the fix, never a traceback (unless --debug), and a check that can fail before any work leaves nothing
under the output root.

Most run the CLI's main() in this process (tests/conftest.py's `cli`: exit code and what reached
stdout/stderr, spawned ranks included), which saves a fresh interpreter's torch and diffusers imports per call.
A subprocess (run_cli) stays where the process matters: a Python path without a package, a Hugging Face cache
chosen by HF_HOME (read when huggingface_hub is imported), the traceback Python prints for --debug, and Ctrl-C
reaching a process group."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import torch

from helpers.exec_world import build_args, cli_command, cli_env, make_table, run_cli
from helpers.processes import spawned_workers, wait_for
from latentforge.version import __version__

CLIPS = 3


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    return make_table(tmp_path_factory.mktemp("world") / "data", count=CLIPS)


def message_of(done, code: int, *phrases: str) -> str:
    """stderr as one line (rich wraps long lines), after checking the exit code, phrases and no traceback."""
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    message = " ".join(done.stderr.split())
    for phrase in phrases:
        assert phrase in message, message
    return message


no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="asks for a GPU that this machine has")


@no_gpu
def test_cuda_device_without_cuda_fails_before_any_work(cli, table, tmp_path):
    root = tmp_path / "cache"
    done = cli(build_args(table, root, "--device", "cuda"))
    message_of(done, 2, "run.device='cuda', but", "use --device cpu (add --procs N")
    assert not root.exists()


@no_gpu
def test_all_gpus_without_gpus_points_at_cpu_processes(cli, table, tmp_path):
    done = cli(build_args(table, tmp_path / "cache", "--gpus", "all"))
    message_of(done, 2, "run.gpus='all' starts one encoder process per GPU, but", "--device cpu (add --procs N")


@no_gpu
def test_deep_verify_on_cuda_without_cuda(cli, built_cache):
    done = cli(["verify", str(built_cache), "--deep", "--device", "cuda"])
    message_of(done, 2, "--device='cuda', but", "use --device cpu")


def test_output_root_that_is_a_file(cli, table, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    done = cli(build_args(table, afile))
    message_of(done, 2, "is a file, not a folder; give a folder with --out")


def test_missing_config_file(cli, tmp_path):
    done = cli(["build", "--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "cache")])
    message_of(done, 2, "nope.yaml: cannot read it", "give an existing YAML file")


def test_a_fractional_integer_is_refused_not_rounded(cli, table, tmp_path):
    done = cli(build_args(table, tmp_path / "cache", "--set", "frames.height=32.5"))
    message_of(done, 2, "frames.height: expected a whole number, got 32.5")


def test_a_checkpoint_hash_for_an_analytic_tokenizer(cli, table, tmp_path):
    done = cli(build_args(table, tmp_path / "cache", "--tokenizer-sha256", "ab" * 32))
    message_of(done, 2, "tokenizer.sha256=", "haar-4x8x8 is analytic and has no weights; unset it")


def test_a_malformed_checkpoint_hash(cli, table, tmp_path):
    done = cli(build_args(table, tmp_path / "cache", "--tokenizer", "wan2.1", "--tokenizer-checkpoint", "x.pth",
                              "--tokenizer-sha256", "abc"))
    message_of(done, 2, "tokenizer.sha256='abc' is not a SHA-256 (64 hex digits")


def test_wrong_checkpoint_hash_fails_before_anything_is_written(cli, table, tmp_path):
    checkpoint = tmp_path / "Wan2.1_VAE.pth"
    checkpoint.write_bytes(b"any bytes: the hash is checked before the file is read as weights")
    root = tmp_path / "cache"
    done = cli(build_args(table, root, "--tokenizer", "wan2.1", "--tokenizer-checkpoint", str(checkpoint),
                              "--tokenizer-sha256", "ab" * 32))
    actual = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    message_of(done, 1, f"has SHA-256 {actual}, but {'ab' * 32} is required")
    assert not root.exists()


def test_a_corrupt_checkpoint_is_named_without_torch_advice(cli, table, tmp_path):
    checkpoint = tmp_path / "Wan2.1_VAE.pth"
    checkpoint.write_bytes(b"PK\x03\x04 truncated download")
    root = tmp_path / "cache"
    done = cli(build_args(table, root, "--tokenizer", "wan2.1", "--tokenizer-checkpoint", str(checkpoint)))
    message = message_of(done, 1, f"cannot read {checkpoint} as a PyTorch checkpoint", "download it again")
    assert "weights_only" not in message
    assert not root.exists()


def test_text_path_that_is_not_a_folder_fails_before_the_probe(cli, table, tmp_path):
    root = tmp_path / "cache"
    done = cli(build_args(table, root, "--text", "t5", "--text-path", str(tmp_path / "nowhere")))
    message_of(done, 2, "is not a model folder (no config.json)", "--text-path")
    assert "probe" not in done.stderr and not root.exists()


def test_text_hub_id_missing_from_the_local_cache(table, tmp_path):
    done = run_cli(build_args(table, tmp_path / "cache", "--text", "t5", "--text-path", "acme/t5-nowhere"),
                   HF_HOME=str(tmp_path / "hf"))
    message_of(done, 2, "'acme/t5-nowhere' is a Hugging Face hub id that is not in the local cache",
               "hf download acme/t5-nowhere")


def test_ray_executor_without_ray_keeps_the_pip_extra(table, tmp_path):
    root = tmp_path / "cache"
    done = run_cli(build_args(table, root, "--executor", "ray"), PYTHONPATH=_without("ray", tmp_path))
    message_of(done, 2, "pip install 'latentforge[ray]'")
    assert not root.exists()


def _without(package: str, tmp_path: Path) -> str:
    """A PYTHONPATH on which `import package` fails as it does where the package is not installed (the caller's
    PYTHONPATH kept after it)."""
    fake = tmp_path / f"no-{package}"
    (fake / package).mkdir(parents=True)
    (fake / package / "__init__.py").write_text(f"raise ImportError('No module named {package}')\n")
    return os.pathsep.join(p for p in (str(fake), str(Path(__file__).resolve().parents[2] / "src"),
                                       os.environ.get("PYTHONPATH")) if p)


def test_publish_to_s3_without_s3fs_keeps_the_pip_extra(built_cache, tmp_path):
    done = run_cli(["publish", str(built_cache), "s3://bucket/prefix"], PYTHONPATH=_without("s3fs", tmp_path))
    message_of(done, 2, "s3:// needs s3fs; pip install 'latentforge[publish]'")


def test_scan_without_an_output_root_names_the_flag(cli, table):
    args = build_args(table, Path("unused"))
    out = args.index("--out")
    del args[out: out + 2]
    message_of(cli(["scan", *args[1:]]), 2, "output.root is empty; give the cache root folder with --out")


def test_version(cli):
    done = cli(["--version"])
    assert done.returncode == 0 and done.stdout.strip() == f"latentforge {__version__}"


def test_the_reader_follows_the_path(cli, table, tmp_path):
    args = build_args(table, tmp_path / "cache")
    reader = args.index("--reader")
    del args[reader: reader + 2]
    done = cli(args)
    assert done.returncode == 0, done.stderr
    assert '"reader": "table"' in (tmp_path / "cache" / "cache_config.json").read_text()


def test_a_build_that_accepts_nothing_fails_and_scan_says_so_first(cli, table, tmp_path):
    root = tmp_path / "cache"
    too_long = ("--set", "frames.num_frames=33")  # the clips have 9 frames
    scan_args = ["scan", *build_args(table, root, *too_long)[1:]]
    message_of(cli(scan_args), 1, f"all {CLIPS} samples were rejected", "too_short x3: lower frames.num_frames")
    message_of(cli(build_args(table, root, *too_long)), 1, f"all {CLIPS} samples were rejected by the plan",
               "too_short x3")
    assert not (root / "_CACHE_COMPLETE").exists() and not (root / "shards").exists()


def test_a_failing_unit_is_named_in_one_line_and_debug_shows_the_traceback(cli, table, tmp_path):
    root = tmp_path / "cache"
    args = build_args(table, root, "--workers-per-gpu", "0")
    done = cli(args, LATENTFORGE_FAULT="encode:1:raise")
    message_of(done, 1, "unit 0 (samples clip000, clip001) failed: InjectedFault", "--debug")
    done = run_cli(["--debug", *args], LATENTFORGE_FAULT="encode:1:raise")
    assert done.returncode == 1 and "Traceback" in done.stderr and "InjectedFault" in done.stderr


def test_a_failing_unit_in_a_spawned_rank_names_its_traceback_file(cli, table, tmp_path):
    root = tmp_path / "cache"
    done = cli(build_args(table, root, "--procs", "2", "--workers-per-gpu", "0"),
                   LATENTFORGE_FAULT="encode:1:raise")
    message = message_of(done, 1, "failed: unit ", "failed: InjectedFault")
    tracebacks = sorted((root / "build").glob("rank*-traceback.txt"))
    assert tracebacks and any(f"(traceback in {path})" in message for path in tracebacks), message
    assert all("InjectedFault" in path.read_text() for path in tracebacks)


def test_verify_refuses_a_stray_file_at_the_root_even_when_listed(cli, cache):
    stray = cache / "notes.txt"
    stray.write_text("my notes\n")
    digest = hashlib.sha256(stray.read_bytes()).hexdigest()
    sums = cache / "SHA256SUMS"
    sums.write_text(sums.read_text() + f"{digest}  notes.txt\n")
    shutil.rmtree(cache / "build", ignore_errors=True)
    done = cli(["verify", str(cache)])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "notes.txt" in done.stdout + done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_ctrl_c_while_decode_workers_start_prints_only_the_resume_line(table, tmp_path):
    """A terminal's Ctrl-C reaches the whole process group, workers still importing torch included."""
    root = tmp_path / "cache"
    process = subprocess.Popen(cli_command(build_args(table, root, "--workers-per-gpu", "2")),
                               env=cli_env(LATENTFORGE_FAULT="decode:1:sleep"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert wait_for(lambda: len(spawned_workers(process.pid)) >= 1), "no decode worker started"
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "terminate called" not in stderr, stderr
    assert "stopped by SIGINT; staged work is kept. Resume with:" in stderr


@pytest.mark.slow
def test_a_corrected_checkpoint_hash_builds_without_overwrite(cli, table, tmp_path):
    from diffusers import AutoencoderKLWan

    torch.manual_seed(0)
    folder = tmp_path / "vae"
    AutoencoderKLWan(base_dim=8).save_pretrained(folder)  # the Wan2.1 architecture at width 8; random weights
    [weights] = folder.glob("*.safetensors")
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    root = tmp_path / "cache"

    def build(sha256: str | None):
        check = ("--tokenizer-sha256", sha256) if sha256 else ()
        return cli(build_args(table, root, "--tokenizer", "wan2.1", "--tokenizer-checkpoint", str(folder),
                                  *check, frames=5, width=16, height=16))

    message_of(build("ab" * 32), 1, f"has SHA-256 {digest}, but {'ab' * 32} is required")
    assert not root.exists()
    done = build(digest)
    assert done.returncode == 0, done.stderr
    assert (root / "_CACHE_COMPLETE").is_file()
    sums = (root / "SHA256SUMS").read_text()
    done = build(None)  # the required hash is a check, not part of what the cache is: the same build resumes
    assert done.returncode == 0, done.stderr
    assert (root / "SHA256SUMS").read_text() == sums


def test_text_hub_id_found_in_the_local_cache(table, tmp_path):
    """A hub id resolves to its snapshot in HF_HOME's hub cache (the layout huggingface_hub writes), offline."""
    from helpers.builds import tiny_t5

    snapshot = tmp_path / "hf" / "hub" / "models--acme--tiny-t5" / "snapshots" / ("0" * 40)
    tiny_t5(snapshot, [{"caption": f"clip number {i}"} for i in range(CLIPS)], d_model=32)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    root = tmp_path / "cache"
    done = run_cli(build_args(table, root, "--text", "t5", "--text-path", "acme/tiny-t5"),
                   HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    assert done.returncode == 0, done.stderr
    assert '"dim": 32' in (root / "cache_config.json").read_text()


@no_gpu
def test_verbs_that_decode_choose_the_gpu_when_torch_sees_one(cli, built_cache, monkeypatch):
    from latentforge import devices
    from latentforge.verification.reencode import Overrides

    done = cli(["verify", str(built_cache), "--deep", "--spot", "1"])
    assert done.returncode == 0, done.stderr
    reason = devices.no_gpu_reason()
    assert f"deep verify on cpu ({reason})" in done.stdout  # this machine has no GPU: said, and why
    monkeypatch.setattr(devices, "no_gpu_reason", lambda: None)  # as on a machine with one
    assert devices.default_device() == "cuda" and Overrides().device == "cuda"


@no_gpu
def test_a_cpu_build_on_a_gpu_host_says_how_to_encode_on_the_gpu(cli, table, tmp_path, monkeypatch):
    """A build encodes on run.device (cpu unless told), where verify and preview take the GPU by themselves: on a
    host whose GPU torch sees, the build says so in one note and names the flags; on this GPU-less machine, not."""
    from latentforge import devices

    quiet = cli(build_args(table, tmp_path / "here"))
    assert quiet.returncode == 0 and "torch sees" not in quiet.stderr, quiet.stderr
    monkeypatch.setattr(devices, "no_gpu_reason", lambda: None)  # as on a machine with one
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    done = cli(build_args(table, tmp_path / "gpu-host"))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert said.count("note: this build encodes on the CPU") == 1 and "torch sees 2 CUDA GPU(s)" in said, said
    assert "--gpus all" in said and "--device cuda" in said


# ------------------------------------------------------------------ the edges a first hour met, each one line


def test_an_upper_case_mp4_is_listed_and_other_files_are_named(cli, table, tmp_path):
    folder = tmp_path / "cosmos"
    (folder / "metas").mkdir(parents=True)
    (folder / "videos").mkdir()
    for i, name in enumerate(("a.mp4", "V3.MP4")):
        shutil.copy(table.parent / "videos" / f"clip{i:03d}.mp4", folder / "videos" / name)
        (folder / "metas" / f"{Path(name).stem}.txt").write_text(f"caption {i}")
    (folder / "videos" / "b.mov").write_bytes(b"not listed")
    done = cli(["scan", "--dataset", str(folder), "--tokenizer", "haar-4x8x8", "--text", "none", "--device", "cpu",
                "--set", "frames.num_frames=9", "--set", "frames.height=32", "--set", "frames.width=48",
                "--out", str(tmp_path / "cache")])
    assert done.returncode == 0, done.stderr
    assert "planned 2" in " ".join(done.stdout.split()), done.stdout
    assert "note:" in done.stderr and "b.mov" in done.stderr and ".mp4 only" in done.stderr


def test_an_empty_mask_cell_is_a_reject_that_says_so(cli, table, tmp_path):
    rows = table.read_text().splitlines()
    with_mask = tmp_path / "t.csv"
    with_mask.write_text("\n".join([rows[0] + ",mask"] + [row + "," for row in rows[1:]]) + "\n")
    shutil.copytree(table.parent / "videos", tmp_path / "videos")
    root = tmp_path / "cache"
    done = cli(build_args(with_mask, root, "--set", "modalities.names=[rgb,mask]", "--set", "dataset.mask_column=mask",
                          "--set", "run.max_reject_fraction=1"))
    assert done.returncode == 1, done.stderr  # every sample rejected
    message_of(done, 1, "missing_source", "the listing names no mask source (an empty mask cell)")


def test_a_negative_limit_is_a_config_error(cli, table, tmp_path):
    message_of(cli(build_args(table, tmp_path / "cache", "--set", "dataset.limit=-1")), 2,
               "dataset.limit=-1 must be >= 0")
    assert not (tmp_path / "cache").exists()


def test_preview_of_no_samples_names_its_own_flag(cli, built_cache):
    message_of(cli(["preview", str(built_cache), "--samples", "0"]), 2, "--samples 0: preview at least one sample")


def test_a_single_video_file_as_the_dataset_says_how_to_list_it(cli, table, tmp_path):
    message_of(cli(build_args(table.parent / "videos" / "clip000.mp4", tmp_path / "cache")[:1] +
                   ["--dataset", str(table.parent / "videos" / "clip000.mp4"), "--out", str(tmp_path / "cache"),
                    "--tokenizer", "haar-4x8x8"]), 2, "is a single file, which no reader takes",
               "`video` and `caption` columns")


def test_rows_added_to_a_finished_cache_point_at_extend(cli, tmp_path):
    root = tmp_path / "cache"
    table = make_table(tmp_path / "data", count=CLIPS + 1)
    lines = table.read_text().splitlines(keepends=True)
    table.write_text("".join(lines[:-1]))
    assert cli(build_args(table, root)).returncode == 0
    table.write_text("".join(lines))  # a row appended to the same table
    message_of(cli(build_args(table, root)), 1, "1 added, 0 removed, 0 changed", "rerun with --extend")
    other = table.with_name("grown.csv")  # the grown listing in another file
    other.write_text("".join(lines))
    message_of(cli(build_args(other, root)), 1, "config.dataset.path", "--extend")


def test_stats_of_a_modality_the_cache_lacks(cli, built_cache):
    message_of(cli(["stats", str(built_cache), "--modality", "flow"]), 2, "--modality 'flow':",
               "holds rgb, mask, depth")
