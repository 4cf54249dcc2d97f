"""`export --to musubi|pt-dicts`: every file read back with safetensors and torch.load(weights_only=True) and compared
with the shard rows as h5py reads them; file names parsed the way musubi-tuner's Wan dataset parses them; file sizes
and modes as os.stat reports them."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from helpers.fake_rows import TEXT_DIM, WAN21_TOKENIZER, build_cache, make_samples
from latentforge.cli.main import main
from latentforge.errors import ConfigError, ForcedWarning
from latentforge.export import EXPORT_RECORD, export_cache, run

UMT5_WIDTH = 4096  # umT5-XXL's, the width every Wan DiT takes


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """The same rows committed with padded and with trimmed text, 4096 wide as umT5-XXL writes it."""
    folder = tmp_path_factory.mktemp("export")
    data = make_samples(text_dim=UMT5_WIDTH)
    build_cache(folder / "padded", data, tokenizer=WAN21_TOKENIZER)
    build_cache(folder / "trimmed", data, text_storage="trimmed", tokenizer=WAN21_TOKENIZER)
    return folder / "padded", folder / "trimmed"


@pytest.fixture(scope="module")
def narrow_cache(tmp_path_factory):
    """Rows with text of another width than any Wan DiT takes (as a 1024-wide T5 or a tiny test encoder writes)."""
    root = tmp_path_factory.mktemp("narrow") / "cache"
    build_cache(root, make_samples(), tokenizer=WAN21_TOKENIZER)
    return root


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


def test_pt_dicts_from_a_trimmed_cache_equal_the_padded_rows(caches, tmp_path):
    padded, trimmed = caches
    out = tmp_path / "pt"
    export_cache(trimmed, "pt-dicts", out)
    for index, row in enumerate(_rows(padded)):
        latents = torch.load(out / "latents" / f"{index:09d}.pt", weights_only=True)
        assert list(latents) == ["latent", "fps"] and latents["fps"] == row["fps"]
        assert np.array_equal(latents["latent"].numpy(), row["latent"])
        text = torch.load(out / "text" / f"{index:09d}.pt", weights_only=True)
        assert list(text) == ["text_embeddings", "text_length", "text_mask", "prompt"]
        assert np.array_equal(text["text_embeddings"].numpy(), row["text"])
        assert int(text["text_length"]) == row["length"] and text["prompt"] == row["prompt"]
        assert text["text_mask"].dtype == torch.bool
        assert text["text_mask"].tolist() == [i < row["length"] for i in range(16)]


def test_the_old_pt_name_is_refused_naming_pt_dicts(caches, tmp_path):
    with pytest.raises(ConfigError, match="'pt' is now 'pt-dicts'.*not the LTX-2 trainer's format"):
        export_cache(caches[0], "pt", tmp_path / "old")
    assert not (tmp_path / "old").exists()


@pytest.mark.parametrize("target", ["musubi", "pt-dicts"])
def test_each_file_holds_only_its_own_tensors(caches, tmp_path, monkeypatch, target):
    """The Dataset hands out rows of one batch tensor: a file must not carry the rest of the batch."""
    monkeypatch.setattr(run, "_BATCH", 4)  # several samples per read, whatever the default is
    out = tmp_path / target
    export_cache(caches[0], target, out, ["rgb"])
    files = [path for path in out.rglob("*") if path.is_file() and path.name != EXPORT_RECORD]
    assert len(files) == 2 * len(_rows(caches[0]))
    for path in files:
        tensors = load_file(path) if path.suffix == ".safetensors" else torch.load(path, weights_only=True)
        own = sum(value.nbytes for value in tensors.values() if isinstance(value, torch.Tensor))
        assert own <= path.stat().st_size <= own + 4096, (path.name, own, path.stat().st_size)


def test_exported_files_get_the_mode_other_cache_files_get(caches, tmp_path):
    """0666 less the umask, as io.py's files (safetensors' own save_file would leave them 0600): 0644 under the
    usual umask, and what another umask allows."""
    modes = {}
    for target, umask in (("musubi", 0o022), ("pt-dicts", 0o007)):
        before = os.umask(umask)
        try:
            export_cache(caches[0], target, tmp_path / target, ["rgb"])
        finally:
            os.umask(before)
        modes[target] = {stat.S_IMODE(path.stat().st_mode) for path in (tmp_path / target).rglob("*")
                         if path.is_file()}
    assert modes == {"musubi": {0o644}, "pt-dicts": {0o660}}


def test_musubi_refuses_text_no_wan_dit_takes_unless_forced(narrow_cache, tmp_path):
    with pytest.raises(ConfigError, match=f"{TEXT_DIM} wide.*{UMT5_WIDTH}-wide umT5.*text.name=umt5.*--force"):
        export_cache(narrow_cache, "musubi", tmp_path / "m", ["rgb"])
    assert not (tmp_path / "m").exists()
    with pytest.warns(ForcedWarning, match="exporting anyway.*text.name=umt5"):
        report = export_cache(narrow_cache, "musubi", tmp_path / "m", ["rgb"], force=True)
    assert report.written == 2 * report.samples
    text = load_file(tmp_path / "m" / "000000000_wan_te.safetensors")["varlen_t5_float16"]
    assert text.shape[1] == TEXT_DIM
    export_cache(narrow_cache, "pt-dicts", tmp_path / "p")  # any width suits generic dicts


def test_cli_names_the_text_fix_and_force_warns_in_one_line(narrow_cache, tmp_path, cli):
    out = str(tmp_path / "m")
    refused = cli(["export", str(narrow_cache), "--to", "musubi", out, "--modality", "rgb"])
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "text.name=umt5" in refused.stderr and "--force" in refused.stderr
    forced = cli(["export", str(narrow_cache), "--to", "musubi", out, "--modality", "rgb", "--force"])
    assert forced.returncode == 0, forced.stderr
    warnings = [line for line in forced.stderr.splitlines() if "exporting anyway" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: ") and "text.name=umt5" in warnings[0]
    assert "42 files written" in forced.stdout


def test_a_rerun_writes_only_what_is_missing_and_refuses_another_export(caches, tmp_path):
    padded, trimmed = caches
    out = tmp_path / "pt"
    first = export_cache(padded, "pt-dicts", out)
    missing = out / "text" / "000000003.pt"
    missing.unlink()
    before = {p: p.read_bytes() for p in out.rglob("*.pt")}
    again = export_cache(padded, "pt-dicts", out)
    assert (again.written, again.skipped) == (1, first.written - 1)
    assert missing.is_file() and all(p.read_bytes() == data for p, data in before.items())
    assert sorted(p.name for p in out.rglob("*") if p.name.startswith(".") and p.is_file()) == []  # no tmp left

    with pytest.raises(ConfigError, match="modalities"):
        export_cache(padded, "pt-dicts", out, ["rgb"])
    with pytest.raises(ConfigError, match="cache_sha256sums_sha256"):
        export_cache(trimmed, "pt-dicts", out)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("someone else's")
    with pytest.raises(ConfigError, match=f"holds no {EXPORT_RECORD}"):
        export_cache(padded, "pt-dicts", tmp_path / "busy")
    with pytest.raises(ConfigError,
                       match="allowed: musubi, musubi-hunyuanvideo, ltx2-trainer, ltx-video-trainer, pt-dicts"):
        export_cache(padded, "onetrainer", tmp_path / "other")


def test_cli_export(caches, tmp_path, capsys):
    padded, _ = caches
    assert main(["export", str(padded), "--to", "musubi", str(tmp_path / "m"), "--modality", "rgb"]) == 0
    assert "files written" in capsys.readouterr().out
    assert main(["export", str(padded), "--to", "pt-dicts", str(tmp_path / "m")]) == 2  # another target's folder


def test_a_damaged_export_record_is_named_and_the_files_are_kept(caches, tmp_path, cli):
    padded, _ = caches
    out = tmp_path / "pt"
    export_cache(padded, "pt-dicts", out)
    (out / EXPORT_RECORD).write_text('{"format": "latentforge-exp')
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    done = cli(["export", str(padded), "--to", "pt-dicts", str(out)])
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
    assert f"{out / EXPORT_RECORD} is damaged" in done.stderr and "export into an empty folder" in done.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_file_that_reads_back_different_is_never_left_in_place(caches, tmp_path, monkeypatch):
    from latentforge.errors import CacheIntegrityError
    from latentforge.export import write

    real_save = write.safetensors_bytes

    def save_with_a_flipped_value(tensors, metadata=None):
        return real_save({key: value + 1 for key, value in tensors.items()}, metadata=metadata)

    monkeypatch.setattr(write, "safetensors_bytes", save_with_a_flipped_value)
    with pytest.raises(CacheIntegrityError, match="read back differs from the cache"):
        export_cache(caches[0], "musubi", tmp_path / "m")
    assert not list((tmp_path / "m").glob("*.safetensors")) and not list((tmp_path / "m").glob(".*tmp*"))
