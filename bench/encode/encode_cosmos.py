"""Cosmos tokenizer encode (full-size models of the released architectures with SEEDED RANDOM WEIGHTS: no real
weights exist here). cosmos-cv8x8x8 at Cosmos-Predict1's diffusion shape (121x704x1280), latentforge fp32 (TF32
off) and bf16 against diffusers' AutoencoderKLCosmos fp32 and bf16 on the same weights; cosmos-dv8x16x16 at its
autoregressive shape (33x640x1024), latentforge fp32 and bf16 token ids (and NVIDIA/Cosmos-Tokenizer's own modules
when --cosmos-reference names a folder holding its `cosmos_tokenizer/`); then the bf16 encode of each in two fresh
processes, compared by SHA-256. Prints a table (s/clip, peak GiB, accuracy); writes JSON with --out.
`--tiny` runs every measurement on the CPU at width 2 and tiny shapes (fp32 only: bf16 is CUDA only).

On the GPU machine (docs/gpu-tests.md: the wheels in .whl/, diffusers among them), from the repository root:

    python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python3 bench/encode/encode_cosmos.py --reps 3 --out $OUT/encode-cosmos.json
    python bench/encode/encode_cosmos.py --tiny        # checks the script on a CPU

`--cosmos-reference DIR` (DIR holding `cosmos_tokenizer/` of NVIDIA/Cosmos-Tokenizer, e.g. `git archive HEAD
cosmos_tokenizer | tar x -C DIR`) also times that reference's DV encode in fp32 and bf16 on the same weights and
counts its ids equal to ours; it imports einops and loguru, so put a loguru wheel in .whl/ for the GPU machine.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cosmos_bench_steps import (  # noqa: E402
    clip,
    fresh_process_hashes,
    machine,
    output_sha256,
    reference_dv_encoder,
    timed_within,
)
from _random_cosmos import random_dv_model, save_random_cv_diffusers  # noqa: E402

from latentforge import registry  # noqa: E402
from latentforge.demo.tiny_tokenizer import save_hub_folder  # noqa: E402
from latentforge.devices import tf32_off  # noqa: E402

CV, DV = "cosmos-cv8x8x8", "cosmos-dv8x16x16"
SHAPES = {CV: "121x704x1280", DV: "33x640x1024"}
TINY_SHAPES = {CV: "9x16x24", DV: "9x32x48"}
WEIGHTS = ("models of the released architectures with seeded random weights (no real weights): speed and memory "
           "do not depend on the values; the accuracy numbers hold for these weights only")


class CosmosBench:
    """Each measurement wrapped so that one failure (an OOM, a missing package) is recorded and the rest run."""

    def __init__(self, args):
        self.args = args
        self.device = torch.device(args.device)
        widths = "width-2" if args.tiny else "full-size"
        self.result = {"machine": machine(self.device), "weights": f"{widths} {WEIGHTS}", "tiny": args.tiny,
                       "reps": args.reps, "shapes": {CV: args.cv_shape, DV: args.dv_shape}, "rows": [],
                       "fresh_processes": {}, "skipped": {}, "errors": {}}
        self.outputs: dict[tuple[str, str], torch.Tensor] = {}  # (model, mode) -> output on the CPU

    def measure(self, model: str, mode: str, load, encode) -> None:
        """Load a model (`load()`), time `encode(loaded, video)`, free the model; a failure becomes an error."""
        print(f"== {model} {mode} ...", flush=True)
        try:
            loaded = load()
            video = clip(self.result["shapes"][model], self.device)
            timing, out = timed_within(lambda: encode(loaded, video), self.device, self.args.reps,
                                       self.args.budget_s)
            self.outputs[(model, mode)] = out.cpu()
            self.result["rows"].append({"model": model, "mode": mode, "shape": self.result["shapes"][model],
                                        **timing, "output_shape": list(out.shape)})
            peak = "" if timing["peak_gib"] is None else f", peak {timing['peak_gib']:.2f} GiB"
            print(f"   {timing['s_per_clip']:.3f} s/clip over {timing['reps']} reps (warm-up "
                  f"{timing['warmup_s']:.1f} s){peak}", flush=True)
        except Exception as error:  # noqa: BLE001 - one failed measurement must not cost the rest of a GPU run
            traceback.print_exc()
            self.result["errors"][f"{model} {mode}"] = f"{type(error).__name__}: {error}"
        finally:
            loaded = video = None  # noqa: F841 - free the model and clip before the next one
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            self.save()

    def save(self) -> None:
        """The JSON so far (after every measurement: a run stopped at its time limit keeps what it measured)."""
        if self.args.out:
            self.args.out.parent.mkdir(parents=True, exist_ok=True)
            self.args.out.write_text(json.dumps(self.result, indent=2) + "\n")

    def skip(self, what: str, why: str) -> None:
        self.result["skipped"][what] = why
        print(f"== {what}: skipped ({why})", flush=True)

    def precisions(self) -> list[str]:
        if self.device.type == "cpu":
            self.result["skipped"].setdefault("bf16", "bf16 runs on CUDA only (no bf16 CPU avg_pool3d kernel)")
            return ["fp32"]
        return ["fp32", "bf16"]

    def run_cv(self, folder: Path) -> None:
        vae = save_random_cv_diffusers(folder, self.args.tiny)
        cls = registry.resolve("tokenizer", CV)
        for precision in self.precisions():
            self.measure(CV, f"latentforge {precision}", lambda p=precision: cls(str(folder), p, device=self.device),
                         lambda tok, video: tok.encode(video))
        for precision in self.precisions():
            dtype = torch.float32 if precision == "fp32" else torch.bfloat16

            def encode_diffusers(model, video, dtype=dtype):
                with torch.inference_mode(), tf32_off():
                    return model.encode(video.to(dtype)).latent_dist.mode().float()

            self.measure(CV, f"diffusers {precision}", lambda d=dtype: copy.deepcopy(vae).to(self.device, d),
                         encode_diffusers)

    def run_dv(self, folder: Path) -> None:
        model = random_dv_model(self.args.tiny)
        save_hub_folder(folder, model)
        cls = registry.resolve("tokenizer", DV)
        for precision in self.precisions():
            self.measure(DV, f"latentforge {precision}", lambda p=precision: cls(str(folder), p, device=self.device),
                         lambda tok, video: tok.encode_ids(video))
        if self.args.cosmos_reference is None:
            self.skip(f"{DV} NVIDIA/Cosmos-Tokenizer", "no --cosmos-reference folder given (its modules are not "
                      "installable; the GPU machine has no network)")
            return
        for precision in self.precisions():
            dtype = torch.float32 if precision == "fp32" else torch.bfloat16
            self.measure(DV, f"Cosmos-Tokenizer {precision}",
                         lambda d=dtype: reference_dv_encoder(self.args.cosmos_reference, model, self.device, d),
                         lambda encode, video: encode(video))

    def guarded(self, what: str, step) -> None:
        """Run a step outside `measure` (making the models, the fresh processes); a failure becomes an error."""
        try:
            step()
        except Exception as error:  # noqa: BLE001 - as in measure
            traceback.print_exc()
            self.result["errors"][what] = f"{type(error).__name__}: {error}"

    def run_fresh_processes(self, folders: dict[str, Path]) -> None:
        precision = self.precisions()[-1]
        folders = {model: folder for model, folder in folders.items() if folder.is_dir()}  # not if making it failed
        hashes = fresh_process_hashes(Path(__file__), folders, self.result["shapes"], self.device, precision)
        for model, pair in hashes.items():
            here = self.outputs.get((model, f"latentforge {precision}"))
            self.result["fresh_processes"][model] = {
                "precision": precision, "sha256": pair, "same_bits": len(set(pair)) == 1,
                "same_as_bench_process": None if here is None else output_sha256(here) == pair[0]}

    def compare(self) -> None:
        """Accuracy against latentforge fp32 of the same model: rel-L2 and max-abs (CV), exact-id fraction (DV)."""
        for row in self.result["rows"]:
            reference = self.outputs.get((row["model"], "latentforge fp32"))
            out = self.outputs[(row["model"], row["mode"])]
            if reference is None or reference.shape != out.shape:
                continue
            if row["model"] == DV:
                row["exact_id_fraction_vs_latentforge_fp32"] = float((out == reference).double().mean())
            else:
                row["rel_l2_vs_latentforge_fp32"] = float((out - reference).norm() / reference.norm())
                row["max_abs_vs_latentforge_fp32"] = float((out - reference).abs().max())

    def run(self) -> dict:
        with tempfile.TemporaryDirectory() as scratch:
            folders = {CV: Path(scratch) / "cosmos-cv8x8x8-diffusers", DV: Path(scratch) / "Cosmos-Tokenizer-DV8x16x16"}
            self.guarded(CV, lambda: self.run_cv(folders[CV]))
            self.guarded(DV, lambda: self.run_dv(folders[DV]))
            self.compare()
            self.guarded("fresh processes", lambda: self.run_fresh_processes(folders))
        self.save()
        return self.result


def _number(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def print_table(result: dict) -> None:
    m = result["machine"]
    print(f"\nCosmos tokenizers, {result['weights']}")
    print(f"{m['device']}; torch {m['torch']}, CUDA {m['cuda']}, cuDNN {m['cudnn']}, diffusers {m['diffusers']}")
    print(f"{'model':<17} {'mode':<22} {'shape':<13} {'s/clip':>8} {'reps':>4} {'peak GiB':>9} {'resident':>9} "
          f"{'rel-L2 vs fp32':>15} {'max-abs':>9} {'exact ids':>9}")
    for r in result["rows"]:
        rel, mx = r.get("rel_l2_vs_latentforge_fp32"), r.get("max_abs_vs_latentforge_fp32")
        ids = r.get("exact_id_fraction_vs_latentforge_fp32")
        print(f"{r['model']:<17} {r['mode']:<22} {r['shape']:<13} {r['s_per_clip']:8.3f} {r['reps']:4d} "
              f"{_number(r['peak_gib'], '.2f'):>9} {_number(r['resident_gib'], '.2f'):>9} {_number(rel, '.3g'):>15} "
              f"{_number(mx, '.3g'):>9} {_number(ids, '.6f'):>9}")
    print("peak GiB: allocated during the timed encodes; resident: before them (the model's weights and the clip)")
    for model, fresh in result["fresh_processes"].items():
        print(f"{model} {fresh['precision']} in two fresh processes: same bits {fresh['same_bits']} "
              f"(sha256 {fresh['sha256'][0][:16]}..., same as this process: {fresh['same_as_bench_process']})")
    for what, why in {**result["skipped"], **result["errors"]}.items():
        print(f"{'skipped' if what in result['skipped'] else 'ERROR'}: {what}: {why}")


def fresh_encode(spec: dict) -> dict[str, str]:
    """In a fresh process: each model's encode of the bench clip, loaded from its folder, as SHA-256."""
    device = torch.device(spec["device"])
    hashes = {}
    for model, (folder, shape) in spec["models"].items():
        tok = registry.resolve("tokenizer", model)(folder, spec["precision"], device=device)
        video = clip(shape, device)
        hashes[model] = output_sha256(tok.encode_ids(video) if model == DV else tok.encode(video))
        tok = video = None  # free before the next model
    return hashes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=3, help="timed encodes per mode after one warm-up")
    parser.add_argument("--budget-s", type=float, default=30.0,
                        help="fewer reps for a mode whose warm-up says `reps` would take longer than this")
    parser.add_argument("--cv-shape", default=SHAPES[CV])
    parser.add_argument("--dv-shape", default=SHAPES[DV])
    parser.add_argument("--cosmos-reference", type=Path, help="a folder holding NVIDIA/Cosmos-Tokenizer's "
                        "cosmos_tokenizer/ (and its dependency loguru importable): also time its DV encode")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tiny", action="store_true", help="CPU, width 2, tiny shapes: checks the script")
    parser.add_argument("--fresh-encode", help=argparse.SUPPRESS)  # JSON: see fresh_process_hashes
    args = parser.parse_args(argv)
    if args.fresh_encode:
        print(json.dumps(fresh_encode(json.loads(args.fresh_encode))))
        return 0
    if args.tiny:
        args.device, args.cv_shape, args.dv_shape, args.reps = "cpu", TINY_SHAPES[CV], TINY_SHAPES[DV], 1
    print_table(CosmosBench(args).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
