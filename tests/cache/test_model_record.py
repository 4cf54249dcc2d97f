"""Commit takes fingerprints and the empty prompt from the first rank's record instead of reloading models,
and a commit without the record (models loaded again) writes the same bytes."""

from pathlib import Path

from helpers.builds import build_quietly, checksummed_bytes, tiny_config, tiny_t5, tiny_world, write_table
from latentforge.cache.layout import MODEL_RECORD
from latentforge.text.t5 import T5TextEncoder


def test_commit_reuses_the_ranks_models_and_matches_a_commit_that_reloads_them(tmp_path, monkeypatch):
    rows = tiny_world(tmp_path / "world", clips=3)
    table = write_table(rows, tmp_path / "world" / "samples.csv")
    text_path = tiny_t5(tmp_path / "t5", rows, d_model=64)
    loads = []
    original = T5TextEncoder.from_config.__func__

    def counting(cls, cfg, device):
        loads.append(device)
        return original(cls, cfg, device)

    monkeypatch.setattr(T5TextEncoder, "from_config", classmethod(counting))
    root = tmp_path / "cache"
    config = tiny_config(table, root, text_path=text_path, overrides=["run.procs=1", "run.workers_per_gpu=0"])
    build_quietly(config)
    assert len(loads) == 1, "the commit loaded T5 again instead of reading the rank's record"
    assert (root / "build" / MODEL_RECORD).is_file()
    first = checksummed_bytes(root)

    # The same staged units, committed without a record: the models load again and the bytes are the same.
    (root / "build" / MODEL_RECORD).unlink()
    for marker in ("_CACHE_COMPLETE", "SHA256SUMS"):
        (root / marker).unlink()
    build_quietly(config)
    assert len(loads) == 2
    assert checksummed_bytes(root) == first
    assert Path(root / "_CACHE_COMPLETE").is_file()
