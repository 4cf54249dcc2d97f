"""output.staging_url on S3 (the moto server on loopback), written by rank processes the committing process does
not share a filesystem object with: the commit finds every planned unit by its own name, so a fresh build, and one
killed during an upload whose staged unit was then changed, both commit the bytes of a locally staged build,
rejects included. (A listing cached before the ranks uploaded once made such a build commit 0 samples.)"""

from __future__ import annotations

import signal

import pytest

from helpers.exec_world import build_args, make_table, run_cli, sums
from helpers.media import pattern_frames, write_video
from helpers.moto_s3 import moto_s3, objects
from latentforge.cli.main import main

pytestmark = pytest.mark.slow  # builds with rank processes; -m 'not slow' leaves it out

BUCKET = "staging"
RANKS = ("--device", "cpu", "--procs", "2", "--workers-per-gpu", "0")


def test_rank_processes_staging_on_s3_commit_the_local_bytes(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "videos").mkdir(parents=True)
    write_video(data / "videos" / "short.mp4", pattern_frames(4, 48, 32, seed=99))  # a probe reject in unit 2
    table = make_table(data, count=5, rows=[{"id": "clip002x", "video": "videos/short.mp4", "caption": "short"}])
    assert main(build_args(table, tmp_path / "local", "--workers-per-gpu", "0")) == 0
    local = sums(tmp_path / "local")
    assert "rejects.jsonl" in local and (tmp_path / "local" / "rejects.jsonl").read_text().count("too_short") == 1
    with moto_s3(BUCKET) as (client, env):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        fresh = build_args(table, tmp_path / "fresh", *RANKS, "--set", f"output.staging_url=s3://{BUCKET}/fresh")
        assert main(fresh) == 0
        assert sums(tmp_path / "fresh") == local

        args = build_args(table, tmp_path / "killed", *RANKS, "--set", f"output.staging_url=s3://{BUCKET}/killed")
        killed = run_cli(args, LATENTFORGE_FAULT="upload:2", **env)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        staged = objects(client, BUCKET, "killed")
        complete = sorted(k for k in staged if k.endswith(".h5") and f"{k}.done.json" in staged)
        assert complete, f"no unit was staged with its sidecar before the kill: {sorted(staged)}"
        changed = bytearray(staged[complete[0]])  # same size, other bytes: its sidecar no longer vouches for it
        changed[len(changed) // 2] ^= 0xFF
        client.put_object(Bucket=BUCKET, Key=f"killed/{complete[0]}", Body=bytes(changed))
        assert main(args) == 0
        assert sums(tmp_path / "killed") == local
        # the changed unit was encoded again (the cache equals the local one), and once committed the units are gone
        assert sorted(objects(client, BUCKET, "killed")) == ["staging.json"]
