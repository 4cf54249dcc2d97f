"""Where a build's text rows come from (`text.source`): the encoder, Cosmos T5 pickles, or pickles first.

- `encoder`: every prompt goes through the text encoder (behind the rank's PromptCache).
- `pickles`: every row is the sample's precomputed Cosmos T5 pickle; no encoder runs in the units.
  A missing, malformed or unsafe pickle rejects the sample (`bad_text_pickle`).
- `pickles+encoder`: the pickle when the sample has one, else the encoder; a malformed or unsafe pickle
  still rejects the sample (a broken file is a data problem, not a reason to silently re-encode).

Lookup (docs/text.md): cosmos_dir reader -> `<dataset root>/t5_xxl/<video stem>.pickle`; cosmos_curate reader ->
the window's `cosmos_predict2_video2world_dataset/t5_xxl/<clip-uuid>_<start>_<end>.pickle`; table reader -> the path in
`dataset.t5_pickle_column` (relative to the table's folder), an empty cell meaning "no pickle".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import registry
from ..cache.layout import text_datasets
from ..cache.model_record import TextRecord
from ..config import BuildConfig
from ..errors import LatentforgeError, SampleRejected
from ..records import Sample
from ..text.base import TextBatch, TextEncoder
from ..text.pickles import PICKLE_PREFIX, load_cosmos_pickle, padded_from_pickle, pickle_dim
from ..text.prompt_cache import PromptCache

if TYPE_CHECKING:
    import torch

@dataclass(frozen=True)
class PickledText:
    row: np.ndarray  # float32 [max_length, D], exact zeros past `length`
    length: int  # the pickle's n_tokens
    provenance: dict[str, Any]  # the manifest row's provenance["text"]


@dataclass(frozen=True)
class UnitText:
    """The text rows of a unit's accepted samples, in order, and where each came from."""

    batch: TextBatch
    provenance: list[dict[str, Any]]


class TextSource:
    """A rank's text stage: pickle rows where text.source says so, the encoder (via its PromptCache) otherwise."""

    def __init__(self, config: BuildConfig, cache: PromptCache | None):
        if config.text.source != "pickles" and cache is None:
            raise ValueError(f"text.source={config.text.source!r} needs an encoder behind a PromptCache")
        self.config = config
        self.mode = config.text.source
        self.cache = cache
        self.max_length = config.text.max_length
        self.dim = cache.encoder.embed_dim if cache is not None else pickle_dim(config.text)
        self.reader = registry.resolve("reader", config.dataset.reader)  # where a sample's pickle is

    @property
    def records_provenance(self) -> bool:
        return self.mode != "encoder"

    def unknown_fractions(self, prompts: list[str]) -> list[float | None]:
        """Each prompt's share of tokens the encoder's tokenizer does not know, on the host (no model call); None
        for all under text.source=pickles, where no encoder is loaded."""
        if self.cache is None:
            return [None] * len(prompts)
        return self.cache.encoder.unknown_fractions(prompts)

    def rejects_unknown(self, fraction: float | None) -> bool:
        """text.on_unknown=reject and more than text.max_unknown_fraction of the caption's tokens are unknown (under
        warn the build counts such rows at commit instead)."""
        text = self.config.text
        return text.on_unknown == "reject" and fraction is not None and fraction > text.max_unknown_fraction

    def check_unknown(self, sample: Sample, caption: str, fraction: float | None) -> None:
        """Raises SampleRejected(unknown_tokens) where rejects_unknown(fraction)."""
        if not self.rejects_unknown(fraction):
            return
        text = self.config.text
        shown = caption if len(caption) <= 60 else caption[:57] + "..."
        raise SampleRejected("unknown_tokens", sample.sample_id,
                             f"{fraction:.0%} of the tokens of caption {shown!r} are unknown to the {text.name} "
                             f"tokenizer (text.max_unknown_fraction={text.max_unknown_fraction}); encode such "
                             "captions with a text encoder that reads their language (text.name=umt5 for "
                             "non-English captions), or keep them with text.on_unknown=warn")

    def pickled(self, sample: Sample) -> PickledText | None:
        """The sample's pickle row, or None when the encoder makes it. Raises SampleRejected(bad_text_pickle)."""
        if self.mode == "encoder":
            return None
        path = self.reader.pickle_path(sample, self.config)
        if path is None or not path.is_file():
            if self.mode == "pickles+encoder":
                return None
            where = "its dataset.t5_pickle_column cell is empty" if path is None else f"{path} does not exist"
            raise SampleRejected("bad_text_pickle", sample.sample_id, f"no T5 pickle: {where}; "
                                 f"{self.reader.pickle_fix}")
        try:
            data = path.read_bytes()
            array = load_cosmos_pickle(data, path, dim=self.dim, max_tokens=self.max_length)
        except OSError as error:
            raise SampleRejected("bad_text_pickle", sample.sample_id, f"{path}: cannot read ({error})") from None
        except LatentforgeError as error:  # UnsafePickleError / BadCosmosPickleError name the file
            raise SampleRejected("bad_text_pickle", sample.sample_id, str(error)) from None
        row, length = padded_from_pickle(array, self.max_length)
        record = {"source": "pickle", "file": path.name, "sha256": hashlib.sha256(data).hexdigest()}
        return PickledText(row, length, record)

    def rows(self, prompts: list[str], pickled: list[PickledText | None]) -> UnitText:
        """Rows for a unit's accepted samples: pickle rows as they are, the rest through the prompt cache. Padded to
        max_length when a pickle row is among them (its padding may hold values), else to the longest row."""
        to_encode = [prompt for prompt, got in zip(prompts, pickled) if got is None]
        encoded = self.cache.encode(to_encode) if to_encode else None
        width = self.max_length if encoded is None or len(to_encode) < len(prompts) else encoded.embeddings.shape[1]
        embeddings = np.zeros((len(prompts), width, self.dim), dtype=np.float32)
        lengths = np.zeros(len(prompts), dtype=np.int64)
        truncated = np.zeros(len(prompts), dtype=bool)
        provenance: list[dict[str, Any]] = []
        next_encoded = 0
        for i, got in enumerate(pickled):
            if got is None:
                embeddings[i, : encoded.embeddings.shape[1]] = encoded.embeddings[next_encoded]
                lengths[i] = encoded.lengths[next_encoded]
                truncated[i] = encoded.truncated[next_encoded]
                next_encoded += 1
                provenance.append({"source": "encoder"})
            else:
                # A pickle does not say whether its prompt was cut: n_tokens == max_length is the only hint.
                embeddings[i], lengths[i] = got.row, got.length
                provenance.append(got.provenance)
        return UnitText(TextBatch(embeddings, lengths, truncated), provenance)


def text_source(config: BuildConfig, cache: PromptCache | None) -> TextSource | None:
    """The text stage for a unit context: None when the units encode no text (no text, or no encoder given)."""
    if config.text.name == "none" or (config.text.source != "pickles" and cache is None):
        return None
    return TextSource(config, cache)


# ----------------------------------------------------------------------------------------------- commit


def empty_prompt_encoder(config: BuildConfig, device: torch.device | str) -> TextEncoder | None:
    """Under text.source=pickles the units run no encoder; the commit loads one only for empty_prompt.h5."""
    if config.text.source != "pickles" or not config.text.empty_prompt:
        return None
    return registry.resolve("text", config.text.name).load(config.text, device)


def build_text_record(config: BuildConfig, encoder: TextEncoder | None,
                      device: torch.device | str) -> TextRecord | None:
    """The text side of a commit; `encoder` is the one the units ran (None under text.source=pickles)."""
    if config.text.name == "none":
        return None
    if encoder is None:
        encoder = empty_prompt_encoder(config, device)
    empty = encoder.encode([""]) if encoder is not None and config.text.empty_prompt else None
    if encoder is None:
        prefix, dim, fingerprint, note = PICKLE_PREFIX, pickle_dim(config.text), {}, None
    else:
        prefix, dim = encoder.dataset_prefix, encoder.embed_dim
        fingerprint, note = encoder.fingerprint(), getattr(encoder, "provenance_note", None)
    embeddings_dataset, length_dataset = text_datasets(prefix)
    return TextRecord(embeddings_dataset, length_dataset, prefix, dim, fingerprint, empty, note)
