"""Every reader refuses a cache whose records do not parse or disagree with its shards (sinks/hdf5/structure.py):
`inspect`, `query`, `stats` and `export` exit 1 with one line naming the file and the fix, write nothing, and the
Datasets raise CacheIntegrityError saying the same."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import pytest

from latentforge.dataset import LatentCacheDataset
from latentforge.errors import CacheIntegrityError
from latentforge.sinks.hdf5.inspect import inspect_cache

FIX = "rebuild the cache, or fetch it again"


def _cut_in_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"\xff\xfe\x00 not what this file holds \x00" * 8)


def _drop_last_line(path: Path) -> None:
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))  # every line still parses


def _first_shard(root: Path) -> Path:
    return sorted((root / "shards").iterdir())[0]


# (file, damage, text the message names besides the path)
DAMAGES: list[tuple[str, Callable[[Path], None]]] = [
    ("manifest.jsonl", _cut_in_half),
    ("manifest.jsonl", _garbage),
    ("manifest.jsonl", _drop_last_line),
    ("manifest.parquet", _cut_in_half),
    ("manifest.parquet", _garbage),
    ("cache_config.json", _cut_in_half),
    ("cache_config.json", _garbage),
    ("shards/*", lambda path: path.unlink()),
]
VERBS = {
    "inspect": lambda root, tmp: ["inspect", str(root)],
    "query": lambda root, tmp: ["query", str(root), "dataset_index >= 0", "--count"],
    "stats": lambda root, tmp: ["stats", str(root), "--out", str(tmp / "stats")],
    "export": lambda root, tmp: ["export", str(root), "--to", "pt-dicts", str(tmp / "export")],
}


def _damage(root: Path, name: str, damage: Callable[[Path], None]) -> Path:
    path = _first_shard(root) if name == "shards/*" else root / name
    damage(path)
    return path


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("name,damage", DAMAGES, ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_a_verb_refuses_a_damaged_cache_in_one_line(cache, tmp_path, cli, verb, name, damage):
    path = _damage(cache, name, damage)
    before = _files(cache)
    done = cli(VERBS[verb](cache, tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert str(path) in lines[0] and FIX in lines[0] and "unexpected" not in lines[0], lines[0]
    assert _files(cache) == before  # nothing written, nothing removed
    assert not (tmp_path / "stats").exists() and not (tmp_path / "export").exists()


@pytest.mark.parametrize("name,damage", DAMAGES, ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_the_dataset_refuses_a_damaged_cache(cache, name, damage):
    path = _damage(cache, name, damage)
    with pytest.raises(CacheIntegrityError) as error:
        LatentCacheDataset(cache)
    assert str(path) in str(error.value) and FIX in str(error.value)


@pytest.mark.parametrize("verb", ["inspect", "stats"])
def test_a_damaged_rejects_file_is_named_with_its_line(cache, tmp_path, cli, verb):
    rejects = cache / "rejects.jsonl"
    rejects.write_text(rejects.read_text() + '{"sample_id": "x", "reason"\n')
    done = cli(VERBS[verb](cache, tmp_path))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert f"{rejects} is damaged (line 2:" in done.stderr and FIX in done.stderr


def test_a_shard_count_that_disagrees_with_the_samples_is_refused(cache):
    config = cache / "cache_config.json"
    config.write_text(config.read_text().replace('"num_shards": 2', '"num_shards": 1'))
    damaged = r"cache_config.json is damaged \(num_shards=1, but 3 samples at 2 per shard make 2\)"
    with pytest.raises(CacheIntegrityError, match=damaged):
        inspect_cache(cache)


def test_an_intact_cache_is_read_as_before(cache, cli):
    assert cli(["inspect", str(cache)]).returncode == 0
    assert cli(["query", str(cache), "dataset_index >= 0", "--count"]).stdout.strip() == "3"
    assert len(LatentCacheDataset(cache)) == 3
