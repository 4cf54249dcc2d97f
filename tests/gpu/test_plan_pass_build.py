"""Kernel plans decided once per build, before any rank encodes, recorded and handed on (docs/tokenizers.md
"A build decides every plan once", "The same bytes on another machine"), through whole `latentforge build` runs.

Three 9x64x64 clips, units of 2 and 1 with output.batch_size=2 (so batches of 2 and of 1), the Wan2.1 VAE at
its released width with random weights, bf16 with recorded cuDNN plans:

- build A: two ranks (two processes on one GPU), a fresh empty shared-book folder, so the plan pass times every
  signature. Its book holds convolutions of both batch sizes; the ranks only replay (a signature the pass
  missed stops a rank with PlanMissing, so the build completing shows the pass covered what they met); the
  shared book was last written before rank 0 wrote the model record, which it does right after loading its
  models and before its first encode (a rank timing a plan would write the shared book later); the build's
  book, the shared book and cache_config.json's `conv_plans` hold the same one book.
- build B: one rank, another empty shared-book folder, `tokenizer.conv_plans_file` = A's cache_config.json, as
  a second machine of the same GPU model would: the same SHA256SUMS as A, the same recorded book, and its own
  shared book never written (nothing was timed).
- (slow, needs ray) build R: run.executor=ray on a Ray of its own, another empty shared-book folder and A's book
  file as conv_plans_file: A's SHA256SUMS, one book in the driver's records and cache_config.json, nothing timed.
- (slow, needs ray) build N: two Ray nodes on this host (both claim its GPU), each with its own TMPDIR, so each
  keeps the build's records in its own node-local folder, the WebDataset sink at a file:// URL and
  output.staging_url, an empty shared-book folder: the plan task decides the book once; the driver's records,
  cache_config.json and every node-local folder hold that one book; a local build given N's book as
  conv_plans_file gives N's SHA256SUMS and times nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.exec_world import make_table, run_cli, sums
from helpers.random_wan import save_random_wan_vae
from helpers.ray_nodes import add_nodes, start_head
from latentforge.cache.layout import MODEL_RECORD

WAN21 = dict(base_dim=96, decoder_base_dim=16)
FRAMES, SIZE = 9, 64


def build_args(table: Path, checkpoint: Path, root: Path | str, shared: Path, *extra: str) -> list[str]:
    return ["build", "--reader", "table", "--dataset", str(table), "--out", str(root), "--tokenizer", "wan2.1",
            "--tokenizer-checkpoint", str(checkpoint), "--precision", "bf16", "--text", "none", "--device", "cuda",
            "--workers-per-gpu", "0", "--quiet", "--set", "dataset.id_column=id",
            "--set", f"frames.num_frames={FRAMES}", "--set", f"frames.height={SIZE}", "--set", f"frames.width={SIZE}",
            "--set", "output.unit_size=2", "--set", "output.batch_size=2", "--set", "output.rows_per_shard=4",
            "--set", "output.min_free_bytes=0", "--set", f"tokenizer.conv_plans_dir={shared}", *extra]


def only_book(folder: Path) -> tuple[Path, dict[str, str]]:
    books = sorted(folder.glob("*.json"))
    assert len(books) == 1, f"expected one book in {folder}, got {[p.name for p in books]}"
    return books[0], json.loads(books[0].read_text())


def cache_plans(root: Path) -> dict[str, dict[str, str]]:
    return json.loads((root / "cache_config.json").read_text())["conv_plans"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plan-pass")
    table = make_table(folder / "world", count=3, frames=FRAMES, width=SIZE, height=SIZE)
    _, checkpoint = save_random_wan_vae(folder / "vae", WAN21)
    return folder, table, checkpoint


@pytest.fixture(scope="module")
def first_build(world):
    """Build A: two ranks, every plan timed by the plan pass into an empty shared folder."""
    folder, table, checkpoint = world
    root, shared = folder / "a", folder / "shared-a"
    done = run_cli(build_args(table, checkpoint, root, shared, "--procs", "2"), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, shared


def test_plans_are_decided_before_the_ranks_and_carried_to_another_machine(cudnn_frontend, world, first_build):
    folder, table, checkpoint = world
    root_a, shared_a = first_build
    _, decided = only_book(root_a / "build" / "conv_plans")
    assert any(name != "pytorch" for name in decided.values()), f"no cuDNN engine plan was chosen: {decided}"
    batches = {signature.split(",")[0] for signature in decided if signature.startswith("x[")}
    assert {"x[1", "x[2"} <= batches, f"the plan pass did not plan both batch sizes: {sorted(batches)}"
    shared_book, shared_entries = only_book(shared_a)
    assert shared_entries == decided  # every plan was timed (by the pass) and the ranks added none
    assert list(cache_plans(root_a).values()) == [decided]
    model_record = root_a / "build" / MODEL_RECORD  # rank 0 writes it after loading, before its first encode
    assert shared_book.stat().st_mtime <= model_record.stat().st_mtime, "a plan was timed after the ranks started"

    root_b, shared_b = folder / "b", folder / "shared-b"
    done = run_cli(build_args(table, checkpoint, root_b, shared_b,
                              "--set", f"tokenizer.conv_plans_file={root_a / 'cache_config.json'}"), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sums(root_b) == sums(root_a), "the carried book did not give the first build's bytes"
    assert cache_plans(root_b) == cache_plans(root_a)
    assert not list(shared_b.glob("*.json")), "build B timed plans although the carried book held them all"


@pytest.mark.slow
def test_a_ray_build_runs_the_one_decided_book(cudnn_frontend, world, first_build):
    pytest.importorskip("ray")
    folder, table, checkpoint = world
    root_a, _ = first_build
    book_a, decided = only_book(root_a / "build" / "conv_plans")
    root_r, shared_r = folder / "ray", folder / "shared-ray"
    done = run_cli(build_args(table, checkpoint, root_r, shared_r, "--executor", "ray",
                              "--set", f"tokenizer.conv_plans_file={book_a}"), timeout=300, RAY_AUTH_MODE="disabled")
    assert done.returncode == 0, done.stderr[-3000:]
    assert sums(root_r) == sums(root_a), "the Ray build's bytes differ from the local build's"
    _, recorded = only_book(root_r / "build" / "conv_plans")
    assert recorded == decided and list(cache_plans(root_r).values()) == [decided]
    assert not list(shared_r.glob("*.json")), "a Ray worker or the plan task timed plans the carried book held"


@pytest.mark.slow
def test_ray_nodes_with_their_own_records_replay_the_one_book_the_plan_task_decided(cudnn_frontend, world, tmp_path):
    pytest.importorskip("ray")
    folder, table, checkpoint = world
    temps = {name: tmp_path / f"tmp-{name}" for name in ("driver", "node_a", "node_b")}
    for temp in temps.values():
        temp.mkdir()
    store = tmp_path / "store"
    wds = ["--set", "output.sink=webdataset", "--set", f"output.staging_url=file://{store}/stage"]
    nodes = start_head()
    try:
        for name in ("node_a", "node_b"):
            add_nodes(nodes, [name], gpus=1, env={"TMPDIR": str(temps[name])})
        shared = tmp_path / "shared-nodes"
        done = run_cli(build_args(table, checkpoint, f"file://{store}/cache", shared, *wds, "--executor", "ray",
                                  "--ray-address", nodes.address), timeout=420,
                       RAY_AUTH_MODE="disabled", TMPDIR=str(temps["driver"]))
        assert done.returncode == 0, done.stderr[-3000:] + nodes.worker_logs()[-3000:]
    finally:
        nodes.close()
    root_n = store / "cache"
    decided = cache_plans(root_n)
    assert len(decided) == 1, f"the cache records {len(decided)} books: {list(decided)}"
    (book,) = decided.values()
    driver_books = sorted(temps["driver"].rglob("conv_plans/*.json"))
    assert [json.loads(p.read_text()) for p in driver_books] == [book], driver_books
    for name in ("node_a", "node_b"):  # a node's folder holds the handed book, or none; never one of its own
        for found in temps[name].rglob("conv_plans/*.json"):
            assert json.loads(found.read_text()) == book, f"{name} recorded another book: {found}"
    _, timed = only_book(shared)  # written by the plan task, the only process that timed
    assert timed == book

    root_l, shared_l = folder / "local-of-nodes", folder / "shared-local-of-nodes"
    done = run_cli(build_args(table, checkpoint, root_l, shared_l, "--set", "output.sink=webdataset",
                              "--set", f"tokenizer.conv_plans_file={root_n / 'cache_config.json'}"), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sums(root_l) == sums(root_n), "the nodes' cache differs from a local build with their book"
    assert not list(shared_l.glob("*.json")), "the local build timed plans although the carried book held them all"
