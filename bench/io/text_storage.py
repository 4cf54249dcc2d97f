"""Padded against trimmed text (text.storage): bytes per sample and the Dataset's samples/s from a cold page cache,
for caches shaped like a Wan 480p build with umT5 text (latent [16, 21, 60, 104] float16, text [512, 4096], every
caption `--tokens` long), written by the real commit (latentforge.dataset.synthetic_cache). Before each read every
shard's pages are dropped from the page cache (posix_fadvise DONTNEED after a sync), so rows come from the disk.

    python bench/io/text_storage.py --samples 48 --tokens 120 --work /tmp/text-storage --out text_storage.json
    python bench/io/text_storage.py --tiny --out text_storage.json   # small shapes, for the tests
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from latentforge import LatentCacheDataset  # noqa: E402 - after the path to src/
from latentforge.dataset.synthetic_cache import SyntheticCacheSpec, write_synthetic_cache  # noqa: E402


def spec(storage: str, samples: int, tokens: int, tiny: bool) -> SyntheticCacheSpec:
    shape = dict(latent_frames=2, latent_height=4, latent_width=6, text_dim=64, max_length=32) if tiny else \
        dict(latent_frames=21, latent_height=60, latent_width=104, text_dim=4096, max_length=512)
    return SyntheticCacheSpec(num_samples=samples, modalities=("rgb",), channels=16, text_name="umt5",
                              text_length=min(tokens, shape["max_length"] // 4 if tiny else shape["max_length"]),
                              text_storage=storage, content="noise",
                              rows_per_shard=16, latent_dataset="video_latent_state", **shape)


def drop_page_cache(root: Path) -> None:
    os.sync()
    for path in (root / "shards").iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def measure(root: Path, storage: str, samples: int, tokens: int, tiny: bool) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    write_synthetic_cache(root, spec(storage, samples, tokens, tiny))
    shard_bytes = sum(p.stat().st_size for p in (root / "shards").iterdir())
    dataset = LatentCacheDataset(root)
    drop_page_cache(root)
    started = time.perf_counter()
    for i in range(len(dataset)):
        dataset[i]
    seconds = time.perf_counter() - started
    return {"bytes_per_sample": round(shard_bytes / len(dataset)),
            "cold_samples_per_s": round(len(dataset) / seconds, 1)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=48)
    parser.add_argument("--tokens", type=int, default=120, help="tokens of every caption (a typical one: 100-150)")
    parser.add_argument("--work", type=Path, default=Path("text-storage-work"))
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    samples = 8 if args.tiny else args.samples
    runs = {storage: measure(args.work / storage, storage, samples, args.tokens, args.tiny)
            for storage in ("padded", "trimmed")}
    print(f"{samples} samples, captions of {args.tokens} tokens" + (" (tiny shapes)" if args.tiny else ""))
    print("| text.storage | MB per sample | cold samples/s |\n|---|---|---|")
    for storage, run in runs.items():
        print(f"| {storage} | {run['bytes_per_sample'] / 1e6:.2f} | {run['cold_samples_per_s']} |")
    report = {"samples": samples, "tokens": args.tokens, "tiny": args.tiny, "runs": runs}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
