"""Records, on a GPU, the kernel plans of every convolution a preset's build runs that the book latentforge ships for
this GPU and software lacks, and writes the shipped book with them added: the book that lets two machines of this
model build the preset's bytes alike (tests/tokenizers/test_shipped_books_cover_presets.py holds the books to it).

For each preset whose tokenizer runs recorded plans, the signatures of every call shape its build can make are traced
on the CPU (tokenizers/wan/plan_signatures.py). On the GPU the preset's fast path (released widths, random weights:
timings do not depend on values) then encodes zeros of each call shape exactly as a build's plan pass does, over a
fresh plan folder whose parent is the shipped book, so only the missing signatures are timed, with every candidate a
build's plan pass times (cuDNN, Triton, and CUTLASS where its library builds). The signatures the GPU met must be the
traced ones, which checks the tracing as well.

    python bench/tools/record_preset_plans.py --out DIR                          # GPU: DIR/<key>.json, DIR/report.json
    LATENTFORGE_CUTLASS=off python bench/tools/record_preset_plans.py --out DIR  # the book of H200s without CUTLASS
    python bench/tools/record_preset_plans.py --check                            # CPU: what each shipped book lacks
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from latentforge import registry  # noqa: E402 - after the src path
from latentforge.config.buckets import parse_buckets  # noqa: E402
from latentforge.config.loading import load_config
from latentforge.config.presets import PRESETS  # noqa: E402
from latentforge.pipeline.kernel_plan_pass import plan_shapes
from latentforge.tokenizers.kernel_planning import plans_kernels  # noqa: E402
from latentforge.tokenizers.kernels.shared_books import SHIPPED_FOLDER  # noqa: E402


def preset_config(name: str):
    """The preset as a build loads it, with placeholder paths for the files no signature depends on."""
    preset = PRESETS[name]
    overrides = ["tokenizer.checkpoint=unused", "dataset.path=[samples.csv]", "dataset.reader=table",
                 "output.root=unused"]
    names = preset.get("modalities", {}).get("names", [])
    overrides += [f"dataset.{m}_column={m}" for m in ("mask", "depth") if m in names]
    if preset.get("conditioning", {}).get("image_embeds"):
        overrides.append("conditioning.image_encoder_path=unused")
    return load_config(preset=name, overrides=overrides)


def call_shapes(config) -> list[tuple[int, int, int, int]]:
    """(batch, frames, height, width) of every tokenizer call of the build: each bucket's, at each batch size."""
    if not config.frames.buckets:
        return plan_shapes(config)
    import dataclasses

    return [shape for bucket in parse_buckets(config.frames)
            for shape in plan_shapes(dataclasses.replace(config, frames=bucket.frames_config(config.frames)))]


def preset_signatures(name: str) -> tuple[object, list, set[str]]:
    """(config, call shapes, traced signatures) of a preset; no signatures where it runs no recorded plans."""
    config = preset_config(name)
    backend = registry.resolve("tokenizer", config.tokenizer.name)
    shapes = call_shapes(config)
    if not plans_kernels(backend, config.tokenizer, "cuda"):
        return config, shapes, set()
    return config, shapes, backend.plan_signatures(config.tokenizer, shapes)


def shipped_entries(key: str) -> dict[str, str]:
    source = resources.files("latentforge.tokenizers.kernels") / SHIPPED_FOLDER / f"{key}.json"
    return json.loads(source.read_text(encoding="utf-8")) if source.is_file() else {}


def check(presets: list[str]) -> int:
    """On the CPU: for every shipped book, the presets' signatures it lacks."""
    folder = resources.files("latentforge.tokenizers.kernels") / SHIPPED_FOLDER
    keys = sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))
    lacking = 0
    for name in presets:
        _, shapes, signatures = preset_signatures(name)
        for key in keys:
            missing = signatures - set(shipped_entries(key))
            lacking += len(missing)
            print(f"{name:32s} {len(signatures):4d} signatures, {len(missing):4d} missing from {key}")
    return 1 if lacking else 0


def record(presets: list[str], out: Path) -> int:
    """On the GPU: time what the shipped book of this environment lacks, write it with the new plans."""
    from latentforge.tokenizers.kernels.shared_books import plans_key
    from latentforge.tokenizers.wan.common import deterministic_cudnn, fast_encoder, prepare_fast_path, wan_options
    from latentforge.tokenizers.wan.fast_encoder import FastWanEncoder

    device = torch.device("cuda")
    prepare_fast_path(device, "plans")  # heuristics mode B, as a build's plan pass (before the first conv)
    deterministic_cudnn(device)
    key = plans_key(device)
    shipped = shipped_entries(key)
    report = {"key": key, "gpu": torch.cuda.get_device_name(device), "presets": {}, "new": {}}
    book = dict(shipped)
    with tempfile.TemporaryDirectory(prefix="plans-") as folder:
        for name in presets:
            config, shapes, traced = preset_signatures(name)
            if not traced:
                continue
            backend = registry.resolve("tokenizer", config.tokenizer.name)
            with torch.device("cuda"):
                vae = backend.released_architecture().to(torch.bfloat16).eval()
            plans = Path(folder) / name  # a fresh plan folder per preset: what it meets is its own
            fast: FastWanEncoder = fast_encoder(vae, device, wan_options(config.tokenizer).max_gpu_mem_gib, False,
                                                True, str(plans))
            started = time.perf_counter()
            with torch.inference_mode():
                for batch, frames, height, width in shapes:
                    video = torch.zeros((batch, 3, frames, height, width), device=device, dtype=torch.bfloat16)
                    fast(backend.fast_input(video))
            torch.cuda.synchronize(device)
            met = set(json.loads((plans / f"{key}.json").read_text(encoding="utf-8")))
            new = {s: plan for s, plan in fast.convs.book.entries().items() if s not in shipped}
            report["presets"][name] = {"shapes": shapes, "signatures": len(traced), "timed": len(new),
                                       "seconds": round(time.perf_counter() - started, 1),
                                       "traced_equals_met": met >= traced and not (traced - met)}
            if traced - met:
                print(f"{name}: the GPU did not meet {len(traced - met)} traced signatures, e.g. "
                      f"{sorted(traced - met)[0]}", file=sys.stderr)
                return 1
            report["new"].update(new)
            book.update(new)
            print(f"{name:32s} {len(traced):4d} signatures, {len(new):4d} timed in "
                  f"{report['presets'][name]['seconds']} s")
            del fast, vae
            torch.cuda.empty_cache()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{key}.json").write_text(json.dumps(dict(sorted(book.items())), indent=1) + "\n", encoding="utf-8")
    (out / f"report-{key}.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(f"wrote {out / (key + '.json')}: {len(shipped)} shipped + {len(report['new'])} new signatures")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="*", default=sorted(PRESETS), help="default: every preset")
    parser.add_argument("--out", type=Path, help="where the book and its report go (GPU)")
    parser.add_argument("--check", action="store_true", help="on the CPU: what each shipped book lacks")
    args = parser.parse_args(argv)
    if args.check:
        return check(args.presets)
    if args.out is None or not torch.cuda.is_available():
        parser.error("recording needs a CUDA GPU and --out (use --check on a CPU)")
    return record(args.presets, args.out)


if __name__ == "__main__":
    sys.exit(main())
