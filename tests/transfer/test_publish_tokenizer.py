"""publish never overwrites a remote cache of another tokenizer or checkpoint: refused before anything there is
touched, naming the field, both values and the fix; the same tokenizer republishes as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.fake_cache import write_fake_cache
from latentforge.errors import ConfigError
from latentforge.transfer import Destination, publish

WAN21 = {"name": "wan2.1", "checkpoint_sha256": "0" * 64, "precision": "bf16", "latent_channels": 16}
WAN22 = {"name": "wan2.2", "checkpoint_sha256": "2" * 64, "precision": "fp32", "latent_channels": 48}


def _cache(root: Path, tokenizer: dict) -> Path:
    channels = tokenizer["latent_channels"]
    return write_fake_cache(root, num_samples=2, modalities=("rgb",), channels=channels, tokenizer=tokenizer)


def _remote_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("other", "field", "named"), [
    (WAN22, "name", "tokenizer.name: 'wan2.1'"),
    ({**WAN21, "checkpoint_sha256": "1" * 64}, "checkpoint_sha256", f"tokenizer.checkpoint_sha256: '{'0' * 64}'"),
])
def test_publish_over_a_cache_of_another_tokenizer_is_refused(tmp_path, other, field, named):
    remote = tmp_path / "remote"
    publish(_cache(tmp_path / "wan21", WAN21), [Destination(remote.as_uri())])
    before = _remote_files(remote)
    with pytest.raises(ConfigError) as caught:
        publish(_cache(tmp_path / "other", other), [Destination(remote.as_uri())])
    message = str(caught.value)
    assert "holds a cache encoded by another tokenizer" in message and named in message
    assert f"{other[field]!r}" in message and "publish to another prefix, or delete the remote cache first" in message
    assert _remote_files(remote) == before  # _SUCCESS and every object untouched


def test_the_same_tokenizer_republishes(tmp_path):
    remote = tmp_path / "remote"
    root = _cache(tmp_path / "a", WAN22)
    publish(root, [Destination(remote.as_uri())])
    report = publish(root, [Destination(remote.as_uri())])
    assert report.destinations[0].uploaded == {}
