"""clip-vit-h14's checkpoint routes refuse what they cannot use, naming the file, the value and the fix; the
checkpoint's SHA-256 is checked against `sha256sum`'s and the pinned release digest."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch
from transformers import CLIPVisionConfig, CLIPVisionModel

from latentforge.conditioning import clip_checkpoint
from latentforge.conditioning.clip_checkpoint import OFFICIAL_FILE, RELEASED_SHA256
from latentforge.conditioning.clip_vision import ClipVisionH14
from latentforge.errors import ConfigError

TINY = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=2, image_size=28,
            patch_size=14, hidden_act="gelu")  # fmt: skip


@pytest.fixture(scope="module")
def encoder_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clip") / "image_encoder"
    torch.manual_seed(1)
    CLIPVisionModel(CLIPVisionConfig(**TINY)).save_pretrained(folder)
    return folder


def _sha256sum(path) -> str:
    return subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]


def test_fingerprint_records_the_sha256_sum_prints_as_json(encoder_folder):
    encoder = ClipVisionH14.load(str(encoder_folder), "cpu", "fp32", None)
    fingerprint = encoder.fingerprint()
    assert fingerprint["checkpoint_sha256"] == _sha256sum(encoder_folder / "model.safetensors")
    assert json.loads(json.dumps(fingerprint)) == fingerprint  # cache_config.json records it as it is


def test_a_wrong_sha256_is_refused_before_loading_naming_file_values_and_fix(encoder_folder):
    actual = _sha256sum(encoder_folder / "model.safetensors")
    wrong = "0" * 64
    for call in (lambda: ClipVisionH14.preflight(str(encoder_folder), wrong),
                 lambda: ClipVisionH14.load(str(encoder_folder), "cpu", "fp32", wrong)):  # fmt: skip
        with pytest.raises(ConfigError) as raised:
            call()
        message = str(raised.value)
        assert str(encoder_folder) in message and actual in message and wrong in message
        assert "conditioning.image_encoder_sha256" in message
    ClipVisionH14.preflight(str(encoder_folder), actual.upper())  # the right digest passes, in any case


def test_a_file_with_the_released_name_is_held_to_the_released_digest(tmp_path):
    """The official file name pins the released SHA-256 (4.77 GB file, Hugging Face LFS pointer); a file of that name
    with other bytes (here a tiny state dict) is refused unless conditioning.image_encoder_sha256 names its digest."""
    path = tmp_path / OFFICIAL_FILE
    torch.save({"visual.cls_embedding": torch.zeros(1, 1, 4)}, path)
    with pytest.raises(ConfigError) as raised:
        ClipVisionH14.preflight(str(path), None)
    assert RELEASED_SHA256[OFFICIAL_FILE] in str(raised.value) and str(path) in str(raised.value)
    ClipVisionH14.preflight(str(path), _sha256sum(path))


@pytest.mark.parametrize("make, expected", [
    (lambda root: root / "absent", "does not exist"),
    (lambda root: root, "neither config.json nor image_encoder/config.json"),
    (lambda root: root / "weights.safetensors", "not a .pth state dict"),
])  # fmt: skip
def test_missing_or_unusable_paths_are_refused_with_the_routes(tmp_path, make, expected):
    (tmp_path / "weights.safetensors").write_bytes(b"x")
    with pytest.raises(ConfigError) as raised:
        ClipVisionH14.preflight(str(make(tmp_path)), None)
    assert expected in str(raised.value) and "image_encoder/" in str(raised.value)


def test_a_folder_without_weights_is_refused(encoder_folder, tmp_path):
    shutil.copy(encoder_folder / "config.json", tmp_path / "config.json")
    with pytest.raises(ConfigError, match="no \\*.safetensors"):
        ClipVisionH14.preflight(str(tmp_path), None)


def test_a_tower_with_missing_keys_is_refused_not_filled_randomly(encoder_folder, tmp_path):
    from safetensors.torch import load_file, save_file

    state = load_file(encoder_folder / "model.safetensors")
    del state[next(k for k in state if k.endswith("layer_norm1.weight"))]
    (tmp_path / "image_encoder").mkdir()
    shutil.copy(encoder_folder / "config.json", tmp_path / "image_encoder" / "config.json")
    save_file(state, tmp_path / "image_encoder" / "model.safetensors")
    with pytest.raises(ConfigError, match="missing keys: .*layer_norm1.weight"):
        ClipVisionH14.load(str(tmp_path), "cpu", "fp32", None)


def test_an_official_file_with_a_foreign_key_is_refused(tmp_path):
    path = tmp_path / "clip.pth"
    torch.save({"visual.cls_embedding": torch.zeros(1, 1, 4), "decoder.weight": torch.zeros(2)}, path)
    with pytest.raises(ConfigError, match="'decoder.weight' is neither the visual nor the text tower"):
        ClipVisionH14.load(str(path), "cpu", "fp32", None)


def test_an_unknown_precision_is_refused_with_the_allowed_ones(encoder_folder):
    with pytest.raises(ConfigError, match="'fp16' is not allowed for clip-vit-h14; allowed: fp32, bf16"):
        ClipVisionH14.load(str(encoder_folder), "cpu", "fp16", None)


def test_official_qkv_rows_split_into_q_k_v_in_order():
    """The official Linear(dim, 3 dim) is read as view(b, s, 3, n, d): rows [0, dim) are q, then k, then v."""
    fused = torch.arange(6 * 2, dtype=torch.float32).reshape(6, 2)
    mapped = clip_checkpoint.official_to_transformers({"visual.transformer.0.attn.to_qkv.weight": fused})
    layer = "vision_model.encoder.layers.0.self_attn"
    assert torch.equal(mapped[f"{layer}.q_proj.weight"], fused[0:2])
    assert torch.equal(mapped[f"{layer}.k_proj.weight"], fused[2:4])
    assert torch.equal(mapped[f"{layer}.v_proj.weight"], fused[4:6])


def test_frames_of_the_wrong_layout_are_refused(encoder_folder):
    encoder = ClipVisionH14.load(str(encoder_folder), "cpu", "fp32", None)
    with pytest.raises(ValueError, match=r"uint8 \[B, H, W, 3\] RGB frames, got torch.float32 \[1, 28, 28, 3\]"):
        encoder.encode(torch.zeros(1, 28, 28, 3))
