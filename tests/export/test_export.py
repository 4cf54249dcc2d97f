"""`export --to musubi|pt`: every file read back with safetensors and torch.load(weights_only=True) and compared with
the shard rows as h5py reads them; file names parsed the way musubi-tuner's Wan dataset parses them."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from helpers.fake_rows import build_cache, make_samples
from latentforge.cli.main import main
from latentforge.errors import ConfigError
from latentforge.export import EXPORT_RECORD, export_cache


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """The same rows committed with padded and with trimmed text."""
    folder = tmp_path_factory.mktemp("export")
    data = make_samples()
    build_cache(folder / "padded", data)
    build_cache(folder / "trimmed", data, text_storage="trimmed")
    return folder / "padded", folder / "trimmed"


def _rows(root: Path) -> list[dict]:
    """Each sample as h5py reads it from the padded cache: latent, text, length, prompt, source_fps."""
    manifest = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    rows = []
    for row in manifest:
        with h5py.File(root / row["shard_path"], "r") as shard:
            rows.append({"latent": shard["perception_latent_state"][row["cache_row"]],
                         "text": shard["t5_text_embeddings"][row["cache_row"]],
                         "length": int(shard["t5_text_length"][row["cache_row"]]), "prompt": row["prompt"],
                         "fps": row["provenance"]["source_fps"]})
    return rows


def test_musubi_files_hold_the_wan_cache_keys_and_names(caches, tmp_path):
    padded, _ = caches
    out = tmp_path / "musubi"
    report = export_cache(padded, "musubi", out, ["rgb"])
    rows = _rows(padded)
    assert (report.samples, report.written, report.skipped) == (len(rows), 2 * len(rows), 0)
    latents = sorted(out.glob("*_wan.safetensors"))  # musubi-tuner's glob for latent caches
    assert len(latents) == len(rows)
    for index, (path, row) in enumerate(zip(latents, rows)):
        tokens = path.name.split("_")  # as musubi-tuner's VideoDataset.prepare_for_training splits them
        assert tokens[-2] == "0064x0048" and tokens[-3] == "00000-009"
        item_key = "_".join(tokens[:-3])
        assert item_key == f"{index:09d}"
        latent_file = load_file(path)
        assert list(latent_file) == ["latents_3x6x8_float16"]
        assert np.array_equal(latent_file["latents_3x6x8_float16"].numpy(), row["latent"][:16])
        with safe_open(str(path), framework="pt") as handle:
            assert handle.metadata() == {"architecture": "wan", "width": "64", "height": "48",
                                         "format_version": "1.0.1", "frame_count": "9"}
        text_path = out / f"{item_key}_wan_te.safetensors"
        text = load_file(text_path)
        assert list(text) == ["varlen_t5_float16"]
        assert np.array_equal(text["varlen_t5_float16"].numpy(), row["text"][: row["length"]])
        with safe_open(str(text_path), framework="pt") as handle:
            assert handle.metadata()["caption1"] == row["prompt"]


def test_pt_files_from_a_trimmed_cache_equal_the_padded_rows(caches, tmp_path):
    padded, trimmed = caches
    out = tmp_path / "pt"
    export_cache(trimmed, "pt", out)
    for index, row in enumerate(_rows(padded)):
        latents = torch.load(out / ".precomputed" / "latents" / f"{index:09d}.pt", weights_only=True)
        assert np.array_equal(latents["latents"].numpy(), row["latent"])
        assert (latents["num_frames"], latents["height"], latents["width"], latents["fps"]) == (3, 6, 8, row["fps"])
        conditions = torch.load(out / ".precomputed" / "conditions" / f"{index:09d}.pt", weights_only=True)
        assert np.array_equal(conditions["prompt_embeds"].numpy(), row["text"])
        assert conditions["prompt_attention_mask"].dtype == torch.bool
        assert conditions["prompt_attention_mask"].tolist() == [i < row["length"] for i in range(16)]


def test_a_rerun_writes_only_what_is_missing_and_refuses_another_export(caches, tmp_path):
    padded, trimmed = caches
    out = tmp_path / "pt"
    first = export_cache(padded, "pt", out)
    missing = out / ".precomputed" / "conditions" / "000000003.pt"
    missing.unlink()
    before = {p: p.read_bytes() for p in out.rglob("*.pt")}
    again = export_cache(padded, "pt", out)
    assert (again.written, again.skipped) == (1, first.written - 1)
    assert missing.is_file() and all(p.read_bytes() == data for p, data in before.items())
    assert sorted(p.name for p in out.rglob("*") if p.name.startswith(".") and p.is_file()) == []  # no tmp left

    with pytest.raises(ConfigError, match="modalities"):
        export_cache(padded, "pt", out, ["rgb"])
    with pytest.raises(ConfigError, match="cache_sha256sums_sha256"):
        export_cache(trimmed, "pt", out)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("someone else's")
    with pytest.raises(ConfigError, match=f"holds no {EXPORT_RECORD}"):
        export_cache(padded, "pt", tmp_path / "busy")
    with pytest.raises(ConfigError, match="allowed: musubi, pt"):
        export_cache(padded, "onetrainer", tmp_path / "other")


def test_cli_export(caches, tmp_path, capsys):
    padded, _ = caches
    assert main(["export", str(padded), "--to", "musubi", str(tmp_path / "m"), "--modality", "rgb"]) == 0
    assert "files written" in capsys.readouterr().out
    assert main(["export", str(padded), "--to", "pt", str(tmp_path / "m")]) == 2  # another target's folder


def test_a_damaged_export_record_is_named_and_the_files_are_kept(caches, tmp_path, cli):
    padded, _ = caches
    out = tmp_path / "pt"
    export_cache(padded, "pt", out)
    (out / EXPORT_RECORD).write_text('{"format": "latentforge-exp')
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    done = cli(["export", str(padded), "--to", "pt", str(out)])
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert f"{out / EXPORT_RECORD} is damaged" in done.stderr and "export into an empty folder" in done.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_file_that_reads_back_different_is_never_left_in_place(caches, tmp_path, monkeypatch):
    from latentforge.errors import CacheIntegrityError
    from latentforge.export import write

    real_save = write.save_file

    def save_with_a_flipped_value(tensors, path, metadata=None):
        real_save({key: value + 1 for key, value in tensors.items()}, path, metadata=metadata)

    monkeypatch.setattr(write, "save_file", save_with_a_flipped_value)
    with pytest.raises(CacheIntegrityError, match="read back differs from the cache"):
        export_cache(caches[0], "musubi", tmp_path / "m")
    assert not list((tmp_path / "m").glob("*.safetensors")) and not list((tmp_path / "m").glob(".*tmp*"))
