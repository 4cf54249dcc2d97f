"""The TransNetV2 weights of `segments.transnetv2_weights`: a local file (latentforge downloads none), its SHA-256
(checked against `segments.transnetv2_sha256` when that is set, and recorded with every analysis), read without
running code (a PyTorch state dict through torch.load(weights_only=True), or safetensors), and loaded only when its
keys and shapes are exactly the model's. Every refusal is a ConfigError naming the file and the fix, raised by the
pre-flight before a build writes anything."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch

from ..errors import ConfigError
from ..hashing import remembered_sha256
from .transnetv2_model import TransNetV2

WEIGHTS_KEY, SHA256_KEY = "segments.transnetv2_weights", "segments.transnetv2_sha256"
ADVICE = ("give the PyTorch state dict converted from the official TensorFlow weights (the official repository "
          "github.com/soCzech/TransNetV2 converts them with inference-pytorch/convert_weights.py into "
          "transnetv2-pytorch-weights.pth), or the same tensors as .safetensors")

_LOADED: dict[tuple[str, str], TransNetV2] = {}  # (resolved path, SHA-256) -> its model, once per process


def weights_sha256(path: str) -> str:
    """The file's SHA-256 (what `sha256sum` prints); ConfigError when it is not a file."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"{WEIGHTS_KEY}={path!r} is not a file; {ADVICE}")
    return remembered_sha256(file)


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _read(file: Path) -> dict[str, torch.Tensor]:
    try:
        if file.name.endswith(".safetensors"):
            from safetensors.torch import load_file

            state = load_file(file)
        else:
            state = torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        if "unsupported global" not in str(error).lower():  # no code it would run: not a pickle of weights
            raise ConfigError(f"{WEIGHTS_KEY}={str(file)!r} cannot be read as weights (neither a PyTorch "
                              f"checkpoint nor safetensors); {ADVICE}") from None
        # torch's own text advises weights_only=False, which would run the file's code
        raise ConfigError(f"{WEIGHTS_KEY}={str(file)!r} is not a plain state dict of tensors: loading it would run "
                          f"code it holds, which latentforge refuses; {ADVICE}") from None
    except Exception as error:  # torch and safetensors raise many types for foreign or corrupt files
        raise ConfigError(f"{WEIGHTS_KEY}={str(file)!r} cannot be read as weights ({_first_line(error)}); "
                          f"{ADVICE}") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f"{WEIGHTS_KEY}={str(file)!r} does not hold a state dict of tensors (it holds a "
                          f"{type(state).__name__}); {ADVICE}")
    return state


def _check_keys(file: Path, state: dict[str, torch.Tensor], model: TransNetV2) -> None:
    expected = model.state_dict()
    problems = [(label, sorted(items)) for label, items in (
        ("unexpected keys", [k for k in state if k not in expected]),
        ("missing keys", [k for k in expected if k not in state]),
        ("tensors of the wrong shape", [f"{k} {list(v.shape)} (expected {list(expected[k].shape)})"
                                        for k, v in state.items() if k in expected and v.shape != expected[k].shape]),
    ) if items]
    if problems:
        listed = "; ".join(f"{len(items)} {label}: {', '.join(items[:8])}{' ...' if len(items) > 8 else ''}"
                           for label, items in problems)
        raise ConfigError(f"{WEIGHTS_KEY}={str(file)!r} is not TransNetV2's state dict ({listed}); {ADVICE}")


def check_weights(path: str, expected_sha256: str | None) -> str:
    """The pre-flight: the file exists, has the pinned SHA-256 (when one is), reads without running code and holds
    exactly TransNetV2's tensors. Returns its SHA-256."""
    digest = weights_sha256(path)
    if expected_sha256 is not None and digest != expected_sha256.strip().lower():
        raise ConfigError(f"{WEIGHTS_KEY}={path!r} has SHA-256 {digest}, but {expected_sha256.strip().lower()} is "
                          f"required ({SHA256_KEY}); pass the weights with that hash or change the required hash")
    file = Path(path).expanduser()
    _check_keys(file, _read(file), TransNetV2())
    return digest


def load_transnetv2(path: str, sha256: str) -> TransNetV2:
    """The model with the weights at `path`, which must still have the SHA-256 the analysis records (`sha256`);
    read once per process."""
    file = Path(path).expanduser().resolve()
    key = (str(file), sha256)
    if key not in _LOADED:
        digest = weights_sha256(str(file))
        if digest != sha256:
            raise ConfigError(f"{WEIGHTS_KEY}={path!r} changed while the build ran (SHA-256 {digest}, {sha256} "
                              "when it started); leave the weights file alone during a build and start it again")
        model = TransNetV2()
        state = _read(file)
        _check_keys(file, state, model)
        model.load_state_dict(state)
        _LOADED[key] = model.eval()
    return _LOADED[key]


def transnetv2_predictor(path: str, sha256: str):
    """A window of uint8 [T, 27, 48, 3] RGB frames -> (single-frame, all-frames) probabilities, float32 [T] each,
    from the model with these weights (decode/transnetv2_cuts.py's Predict)."""
    model = load_transnetv2(path, sha256)

    def predict(window):
        with torch.inference_mode():
            single, all_frames = model(torch.from_numpy(window)[None])
        return torch.sigmoid(single[0]).numpy(), torch.sigmoid(all_frames[0]).numpy()

    return predict
