"""The cache's README.md: what the cache is, its shapes and counts, where latents and text come from, and
an integrity block (seed 000's commands for a local build) that runs as is in bash.

Rendered from cache_config.json alone (plus a few notes), so it is as deterministic as the config.
"""

from __future__ import annotations

from typing import Any

from .errors import ConfigError
from .writers.shards import EMPTY_PROMPT_NAME, shard_paths

README_CONTEXT_KEYS = ("title", "description", "text_note", "tokenizer_note")


def _integrity_block(num_samples: int, num_shards: int) -> str:
    # Chained with && so the block's status is its verdict, pasted into a shell or run with `bash`.
    return f"""```bash
CACHE_ROOT="${{CACHE_ROOT:-.}}"
# A local build ends with _CACHE_COMPLETE (built and verified); `latentforge publish` adds _SUCCESS once
# every destination holds every file, after which `test -f "$CACHE_ROOT/_SUCCESS"` passes too.
test -f "$CACHE_ROOT/_CACHE_COMPLETE" &&
test -f "$CACHE_ROOT/cache_config.json" &&
test -f "$CACHE_ROOT/manifest.jsonl" &&
test -f "$CACHE_ROOT/SHA256SUMS" &&
test "$(find "$CACHE_ROOT/shards" -maxdepth 1 -name '*.h5' | wc -l)" -eq {num_shards} &&
test "$(wc -l < "$CACHE_ROOT/manifest.jsonl")" -eq {num_samples} &&
(cd "$CACHE_ROOT" && sha256sum -c --quiet SHA256SUMS) &&
echo "cache integrity OK: {num_shards} shards, {num_samples} samples"
```"""


def _shape(values: list[int] | tuple[int, ...]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _latent_lines(config: dict[str, Any], context: dict[str, Any]) -> list[str]:
    latent, tokenizer = config["latent"], config.get("tokenizer") or {}
    lines = [f"- Latent: `{latent['dataset']}` {config['storage_dtype']} `{_shape(latent['shape'])}` per sample "
             "(channels, latent frames, height, width)."]
    for modality in latent.get("modalities", []):
        lo, hi = modality["channels"]
        lines.append(f"  - `{modality['name']}`: channels {lo}..{hi - 1}, role `{modality['role']}`")
    conditioning = latent.get("conditioning")
    if conditioning:
        lines.append(f"  - Conditioning: `{conditioning['modality']}` latent frames "
                     f"{_shape(conditioning['latent_frames'])}; the other modalities are prediction targets.")
    lines.append(f"- Tokenizer: `{tokenizer.get('name')}`, precision `{tokenizer.get('precision')}`, latents "
                 f"normalised by `{latent.get('normalization', 'tokenizer')}` statistics (posterior mean).")
    if tokenizer.get("checkpoint_sha256"):
        lines.append(f"  - Checkpoint SHA-256: `{tokenizer['checkpoint_sha256']}`")
    if context.get("tokenizer_note"):
        lines.append(f"  - Note: {context['tokenizer_note']}")
    return lines


def _text_lines(config: dict[str, Any], context: dict[str, Any]) -> list[str]:
    text = config.get("text")
    if text is None:
        return ["- Text: none (this cache holds no text embeddings)."]
    lines = [f"- Text: `{text['name']}` last hidden state, `{text['embeddings_dataset']}` {config['storage_dtype']} "
             f"`[{text['max_length']}, {text['dim']}]` per sample, rows at and past `{text['length_dataset']}` "
             "exactly 0; the length is `attention_mask.sum()` (counts `</s>`)."]
    if text.get("empty_prompt"):
        lines.append(f"  - `{EMPTY_PROMPT_NAME}` holds the empty prompt's embedding (for classifier-free guidance).")
    if context.get("text_note"):
        lines.append(f"  - Note: {context['text_note']}")
    return lines


def _dataset_table(config: dict[str, Any]) -> list[str]:
    latent, text, dtype = config["latent"], config.get("text"), config["storage_dtype"]
    rows = [f"{latent['dataset']}  {dtype}  [N, {', '.join(str(v) for v in latent['shape'])}]"]
    if text is not None:
        rows.append(f"{text['embeddings_dataset']}  {dtype}  [N, {text['max_length']}, {text['dim']}]")
        rows.append(f"{text['length_dataset']}  uint16  [N]")
    rows.append("source_index  int64  [N]")
    return ["```text", *rows, "```"]


def _layout_block(config: dict[str, Any]) -> list[str]:
    shards = shard_paths(config["num_samples"], config["rows_per_shard"])
    names = [rel.split("/", 1)[1] for rel, _, _ in shards]
    listed = names if len(names) <= 3 else [names[0], "...", names[-1]]
    top = "README.md cache_config.json manifest.jsonl rejects.jsonl"
    if config.get("text") is not None and config["text"].get("empty_prompt"):
        top += f" {EMPTY_PROMPT_NAME}"
    return ["```text", top, "SHA256SUMS _CACHE_COMPLETE [_SUCCESS after publish]", "shards/",
            *(f"  {name}" for name in listed), "```"]


def render_cache_readme(cache_config: dict[str, Any], readme_context: dict[str, Any]) -> str:
    """README.md text for a cache described by a filled-in cache_config (counts included)."""
    unknown = sorted(set(readme_context) - set(README_CONTEXT_KEYS))
    if unknown:
        raise ConfigError(f"unknown readme_context keys {unknown}; allowed: {', '.join(README_CONTEXT_KEYS)}")
    config = cache_config
    frames = config.get("frames") or {}
    title = readme_context.get("title") or f"Latent cache: {config.get('preset') or config['latent']['dataset']}"
    parts = [f"# {title}", ""]
    if readme_context.get("description"):
        parts += [readme_context["description"], ""]
    parts += [
        "A training-ready latent cache built by latentforge "
        f"{config.get('latentforge_version', '')}: a DataLoader reads latents and text embeddings directly, "
        "with no tokenizer or text-encoder work per step.",
        "",
        "## Contents",
        "",
        f"- Preset: `{config.get('preset')}`",
        f"- Samples: {config['num_samples']} in {config['num_shards']} shards of at most "
        f"{config['rows_per_shard']} rows (dataset_index order = source order).",
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
        "`manifest.jsonl` maps each `dataset_index` to `shard_path`/`cache_row`, with the sample id, prompt, "
        "source path and provenance (frame indices, timestamps, crop box). `rejects.jsonl` lists the samples "
        "left out and why. `cache_config.json` records every setting that defines the numbers.",
        "",
        "Reading one sample:",
        "",
        "```python",
        "import json, h5py",
        'rows = [json.loads(line) for line in open("manifest.jsonl", encoding="utf-8")]',
        "row = rows[0]",
        'with h5py.File(row["shard_path"], "r") as shard:',
        f'    latent = shard["{config["latent"]["dataset"]}"][row["cache_row"]]',
        *([f'    text = shard["{config["text"]["embeddings_dataset"]}"][row["cache_row"]]']
          if config.get("text") is not None else []),
        "```",
        "",
        "## Integrity check",
        "",
        "Run from the cache folder, or set `CACHE_ROOT`:",
        "",
        _integrity_block(config["num_samples"], config["num_shards"]),
        "",
        "`latentforge verify ROOT` checks more: dataset shapes and chunking, manifest against shards, NaN/Inf, "
        "text padding.",
        "",
    ]
    return "\n".join(parts)
