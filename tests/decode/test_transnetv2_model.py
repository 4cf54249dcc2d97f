"""Our TransNetV2 module against the official PyTorch port (github.com/soCzech/TransNetV2): the same seeded weights,
written to a .pth and loaded through the real loading code, give the logits the official module gave, and our
windows give the per-frame probabilities the official predict_frames gave (tests/decode/fixtures/README.md says how
transnetv2_reference.npz was recorded). Weight files that are not TransNetV2's are refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.transnetv2_seeded import reference_frames, seeded_state_dict
from latentforge.decode.transnetv2_cuts import WindowedPredictions
from latentforge.decode.transnetv2_model import TransNetV2
from latentforge.decode.transnetv2_weights import check_weights, load_transnetv2
from latentforge.errors import ConfigError

REFERENCE = Path(__file__).parent / "fixtures" / "transnetv2_reference.npz"
TOLERANCE = 1e-4  # float32 on other CPUs and torch builds; on the recording machine the difference was 0


@pytest.fixture(scope="module")
def seeded_weights(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("transnetv2") / "seeded.pth"
    torch.save(seeded_state_dict(TransNetV2().state_dict()), path)
    return path


def test_our_module_gives_the_official_logits(seeded_weights):
    reference = np.load(REFERENCE)
    model = load_transnetv2(str(seeded_weights), check_weights(str(seeded_weights), None))
    with torch.no_grad():
        single, all_frames = model(torch.from_numpy(reference_frames()[None, :100]))
    assert np.abs(single[0].numpy() - reference["single_logits"]).max() < TOLERANCE
    assert np.abs(all_frames[0].numpy() - reference["many_logits"]).max() < TOLERANCE
    assert reference["single_logits"].std() > 0.01  # the reference is not a constant a broken module could match


def test_our_windows_give_the_official_predict_frames(seeded_weights):
    reference = np.load(REFERENCE)
    model = load_transnetv2(str(seeded_weights), check_weights(str(seeded_weights), None))

    def predict(window):
        with torch.no_grad():
            single, all_frames = model(torch.from_numpy(window[None]))
        return torch.sigmoid(single[0]).numpy(), torch.sigmoid(all_frames[0]).numpy()

    windows = WindowedPredictions(predict)
    for frame in reference_frames():
        windows.feed(frame)
    single, all_frames = windows.finish()
    assert single.shape == all_frames.shape == reference["single_probs"].shape
    assert np.abs(single - reference["single_probs"]).max() < TOLERANCE
    assert np.abs(all_frames - reference["many_probs"]).max() < TOLERANCE


def test_weight_files_that_are_not_transnetv2_are_refused_by_name(tmp_path, seeded_weights):
    state = torch.load(seeded_weights, weights_only=True)
    digest = check_weights(str(seeded_weights), None)
    with pytest.raises(ConfigError, match="transnetv2_sha256"):
        check_weights(str(seeded_weights), "0" * 64)
    assert check_weights(str(seeded_weights), digest.upper()) == digest
    with pytest.raises(ConfigError, match=r"is not a file; give the PyTorch state dict converted"):
        check_weights(str(tmp_path / "absent.pth"), None)
    renamed = {("model." + k if k.startswith("fc1") else k): v for k, v in state.items()}
    torch.save(renamed, tmp_path / "renamed.pth")
    with pytest.raises(ConfigError, match=r"2 unexpected keys: model.fc1.bias, model.fc1.weight; 2 missing keys"):
        check_weights(str(tmp_path / "renamed.pth"), None)
    torch.save({**state, "cls_layer1.weight": torch.zeros(1, 512)}, tmp_path / "narrow.pth")
    with pytest.raises(ConfigError, match=r"cls_layer1.weight \[1, 512\] \(expected \[1, 1024\]\)"):
        check_weights(str(tmp_path / "narrow.pth"), None)
    torch.save({"model": TransNetV2()}, tmp_path / "pickled.pth")  # a whole module: loading it would run code
    with pytest.raises(ConfigError, match="would run code"):
        check_weights(str(tmp_path / "pickled.pth"), None)
    (tmp_path / "text.pth").write_text("not weights")
    with pytest.raises(ConfigError, match=r"text.pth' cannot be read as weights"):
        check_weights(str(tmp_path / "text.pth"), None)


def test_safetensors_weights_load_as_the_pth_does(tmp_path, seeded_weights):
    from safetensors.torch import save_file

    state = torch.load(seeded_weights, weights_only=True)
    save_file(state, tmp_path / "seeded.safetensors")
    model = load_transnetv2(str(tmp_path / "seeded.safetensors"), check_weights(str(tmp_path / "seeded.safetensors"),
                                                                                  None))
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
