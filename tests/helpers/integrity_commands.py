"""Seed 000's cache integrity commands, quoted verbatim (its "完整性检查" section; the seed lost its newlines)."""

from helpers import REPO

SEED_000_INTEGRITY = [
    'test -f "$CACHE_ROOT/_SUCCESS"',
    'test -f "$CACHE_ROOT/cache_config.json"',
    'test -f "$CACHE_ROOT/manifest.jsonl"',
    'test -f "$CACHE_ROOT/SHA256SUMS"',
    'test "$(find "$CACHE_ROOT/shards" -maxdepth 1 -name \'*.h5\' | wc -l)" -eq 28',
    'test "$(wc -l < "$CACHE_ROOT/manifest.jsonl")" -eq 82869',
]
SEED_000_FILES = sorted((REPO.parent / "shared" / "seeds").glob("000_*.txt"))
