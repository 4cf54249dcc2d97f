"""The cache's README.md: what the cache is, its shapes and counts, where latents and text come from, and
an integrity block of shell commands that runs as is in bash.

Rendered from cache_config.json alone (plus a few notes), so it is as deterministic as the config.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .config_file import CacheConfig
from .layout import (
    CACHE_CONFIG,
    COMPLETE_MARKER,
    EMPTY_PROMPT,
    MANIFEST,
    MANIFEST_TABLE,
    PUBLISHED_MARKER,
    README,
    REJECTS,
    SHARDS_DIR,
    SOURCE_INDEX_DATASET,
    SUMS,
)
from .text_rows import TRIMMED

README_CONTEXT_KEYS = ("title", "description", "text_note", "tokenizer_note")


def _integrity_block(num_samples: int, num_shards: int) -> str:
    # Chained with && so the block's status is its verdict, pasted into a shell or run with `bash`.
    return f"""```bash
CACHE_ROOT="${{CACHE_ROOT:-.}}"
# A local build ends with {COMPLETE_MARKER} (built and verified); `latentforge publish` adds {PUBLISHED_MARKER} once
# every destination holds every file, after which `test -f "$CACHE_ROOT/{PUBLISHED_MARKER}"` passes too.
test -f "$CACHE_ROOT/{COMPLETE_MARKER}" &&
test -f "$CACHE_ROOT/{CACHE_CONFIG}" &&
test -f "$CACHE_ROOT/{MANIFEST}" &&
test -f "$CACHE_ROOT/{SUMS}" &&
test "$(find "$CACHE_ROOT/{SHARDS_DIR}" -maxdepth 1 -name '*.h5' | wc -l)" -eq {num_shards} &&
test "$(wc -l < "$CACHE_ROOT/{MANIFEST}")" -eq {num_samples} &&
(cd "$CACHE_ROOT" && sha256sum -c --quiet {SUMS}) &&
echo "cache integrity OK: {num_shards} shards, {num_samples} samples"
```"""


def _shape(values: list[int] | tuple[int, ...]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _latent_lines(config: CacheConfig, context: dict[str, Any]) -> list[str]:
    latent, tokenizer, tokens = config.latent, config.tokenizer, config.tokens
    if tokens is None:
        lines = [f"- Latent: `{latent.dataset}` {config.storage_dtype} `{_shape(latent.shape)}` per sample "
                 "(channels, latent frames, height, width)."]
    else:
        lines = [f"- Token ids: `{latent.dataset}` {tokens.dtype} `{_shape(latent.shape)}` per sample (modality, "
                 f"latent frames, height, width), each in [0, {tokens.vocabulary}); flattened in (t, h, w) raster "
                 f"order a modality is a sequence of {tokens.sequence_length} tokens."]
    for modality in latent.modalities:
        lo, hi = modality.channels
        lines.append(f"  - `{modality.name}`: channels {lo}..{hi - 1}, role `{modality.role}`")
    if latent.conditioning_modality is not None:
        lines.append(f"  - Conditioning: `{latent.conditioning_modality}` latent frames "
                     f"{_shape(latent.conditioning_frames)}; the other modalities are prediction targets.")
    if tokens is None:
        lines.append(f"- Tokenizer: `{tokenizer.get('name')}`, precision `{tokenizer.get('precision')}`, latents "
                     f"normalised by `{latent.normalization}` statistics (posterior mean).")
    else:
        lines.append(f"- Tokenizer: `{tokenizer.get('name')}`, precision `{tokenizer.get('precision')}`, FSQ levels "
                     f"`{_shape(tokens.levels or ())}`.")
    if config.checkpoint_sha256:
        lines.append(f"  - Checkpoint SHA-256: `{config.checkpoint_sha256}`")
    if context.get("tokenizer_note"):
        lines.append(f"  - Note: {context['tokenizer_note']}")
    return lines


def _text_lines(config: CacheConfig, context: dict[str, Any]) -> list[str]:
    text = config.text
    if text is None:
        return ["- Text: none (this cache holds no text embeddings)."]
    lines = [f"- Text: `{text.name}` last hidden state, `{text.embeddings_dataset}` {config.storage_dtype} "
             f"`[{text.max_length}, {text.dim}]` per sample, rows at and past `{text.length_dataset}` "
             "exactly 0; the length is `attention_mask.sum()` (counts `</s>`)."]
    if text.storage == TRIMMED:
        lines.append(f"  - Stored trimmed: `{text.embeddings_dataset}` holds only each row's first `length` tokens, "
                     f"flattened (`[length * {text.dim}]`, variable length); reshape to `[length, {text.dim}]` and "
                     f"zero-pad to `{text.max_length}` rows for the tensor above.")
    if text.empty_prompt:
        lines.append(f"  - `{EMPTY_PROMPT}` holds the empty prompt's embedding (for classifier-free guidance).")
    if context.get("text_note"):
        lines.append(f"  - Note: {context['text_note']}")
    return lines


def _dataset_table(config: CacheConfig) -> list[str]:
    latent, text, dtype = config.latent, config.text, config.storage_dtype
    rows = [f"{latent.dataset}  {config.latent_dtype}  [N, {', '.join(str(v) for v in latent.shape)}]"]
    if text is not None:
        shape = "[N] variable-length" if text.storage == TRIMMED else f"[N, {text.max_length}, {text.dim}]"
        rows.append(f"{text.embeddings_dataset}  {dtype}  {shape}")
        rows.append(f"{text.length_dataset}  uint16  [N]")
    sound = () if config.audio is None else config.audio.streams  # audio.enabled: PCM at config.audio.sample_rate
    for stream in (() if config.conditioning is None else config.conditioning.streams) + sound:
        rows.append(f"{stream.name}  {stream.dtype}  [N, {', '.join(str(v) for v in stream.shape)}]")
    rows.append(f"{SOURCE_INDEX_DATASET}  int64  [N]")
    return ["```text", *rows, "```"]


def _layout_block(config: CacheConfig) -> list[str]:
    names = [rel.split("/", 1)[1] for rel, _, _ in config.shard_paths()]
    listed = names if len(names) <= 3 else [names[0], "...", names[-1]]
    top = f"{README} {CACHE_CONFIG} {MANIFEST} {MANIFEST_TABLE} {REJECTS}"
    if config.text is not None and config.text.empty_prompt:
        top += f" {EMPTY_PROMPT}"
    return ["```text", top, f"{SUMS} {COMPLETE_MARKER} [{PUBLISHED_MARKER} after publish]", f"{SHARDS_DIR}/",
            *(f"  {name}" for name in listed), "```"]


def render_cache_readme(config: CacheConfig, readme_context: dict[str, Any]) -> str:
    """README.md text for a cache described by a filled-in cache_config (counts included)."""
    unknown = sorted(set(readme_context) - set(README_CONTEXT_KEYS))
    if unknown:
        raise ConfigError(f"unknown readme_context keys {unknown}; allowed: {', '.join(README_CONTEXT_KEYS)}")
    frames = config.frames
    title = readme_context.get("title") or f"Latent cache: {config.preset or config.latent.dataset}"
    parts = [f"# {title}", ""]
    if readme_context.get("description"):
        parts += [readme_context["description"], ""]
    parts += [
        "A training-ready latent cache built by latentforge "
        f"{config.latentforge_version}: a DataLoader reads latents and text embeddings directly, "
        "with no tokenizer or text-encoder work per step.",
        "",
        "## Contents",
        "",
        f"- Preset: `{config.preset}`",
        f"- Samples: {config.num_samples} in {config.num_shards} shards of at most "
        f"{config.rows_per_shard} rows (dataset_index order = source order).",
        f"- Frames: {frames.get('num_frames')} frames at {frames.get('height')}x{frames.get('width')}, fps "
        f"`{frames.get('fps')}`, resize `{frames.get('resize')}`.",
        *_latent_lines(config, readme_context),
        *_text_lines(config, readme_context),
        "",
        "## Files",
        "",
        *_layout_block(config),
        "",
        "HDF5 datasets of each shard (N = rows in the shard), one-sample chunks, no compression:",
        "",
        *_dataset_table(config),
        "",
        f"`{MANIFEST}` maps each `dataset_index` to `shard_path`/`cache_row`, with the sample id, prompt, "
        f"source path and provenance (frame indices, timestamps, crop box). `{REJECTS}` lists the samples "
        f"left out and why. `{CACHE_CONFIG}` records every setting that defines the numbers. `{MANIFEST_TABLE}` "
        "holds the manifest's rows as a table for SQL, e.g. `latentforge query . \"caption LIKE '%car%'\"`.",
        "",
        "Reading one sample:",
        "",
        "```python",
        "import json, h5py",
        f'rows = [json.loads(line) for line in open("{MANIFEST}", encoding="utf-8")]',
        "row = rows[0]",
        'with h5py.File(row["shard_path"], "r") as shard:',
        f'    latent = shard["{config.latent.dataset}"][row["cache_row"]]',
        *([f'    text = shard["{config.text.embeddings_dataset}"][row["cache_row"]]']
          if config.text is not None else []),
        "```",
        "",
        "## Integrity check",
        "",
        "Run from the cache folder, or set `CACHE_ROOT`:",
        "",
        _integrity_block(config.num_samples, config.num_shards),
        "",
        "`latentforge verify ROOT` checks more: dataset shapes and chunking, manifest against shards, NaN/Inf, "
        "text padding.",
        "",
    ]
    return "\n".join(parts)
