"""The tables bench/build/build.py prints from its results dict (the same dict goes to build-bench.json)."""

from __future__ import annotations

from typing import Any


def _f(value: Any, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def print_tables(results: dict[str, Any]) -> None:
    phases = results["phases"]
    print(f"\nmachine: {results['machine']}")
    if "prepare" in phases:
        p = phases["prepare"]
        print(f"dataset: {p['rows']} rows over {p['clips']} clips in {p['dataset_s']:.1f} s; "
              f"models {p['models_s']:.1f} s")
    if "cpu" in phases:
        c = phases["cpu"]
        clip = c["clip"]
        print(f"\nCPU cost of one {clip['frames']}-frame {clip['source']} clip -> {clip['output']} ({clip['filter']}), "
              f"torch threads {c['torch_threads']}, FFmpeg threads {c.get('decode_threads', 0)} "
              "(target: decode+resize+normalise <= 1.0 core-s)")
        for row in c["rows"]:
            print(f"  {row['path']:<62} {row['core_s']:7.3f} core-s {row['wall_s']:7.3f} s wall")
        print(f"  NVDEC rows decoded with: {c.get('nvdec_decoder_used')}; device resize: "
              f"{c.get('nvdec_device_resize_decoder_used')}")
        d = c.get("device_resize")
        if d:
            print(f"  device resize on {d['device']} ({d['layout']}, {d['yuv_mb']:.1f} MB): {d['convert_s']:.4f} s "
                  f"per clip, {d['upload_and_convert_s']:.4f} s with the upload; vs swscale max "
                  f"{d['vs_swscale']['max_abs']} mean {d['vs_swscale']['mean_abs']:.3f} levels, vs torch max "
                  f"{d['vs_torch']['max_abs']} mean {d['vs_torch']['mean_abs']:.3f}")
    if "pure" in phases:
        p = phases["pure"]
        per = ", ".join(f"{k} {v:.3f} s" for k, v in p["seconds_per_batch"].items())
        print(f"\npure encode, batch {p['batch']}: {per} per batch; {p['samples_per_s_all_modalities']:.3f} samples/s "
              f"(all modalities), {p['samples_per_s_rgb']:.3f} samples/s (RGB only); "
              f"peak GPU {_f(p['peak_gpu_gib'], '.1f')} GiB")
        launch = ", ".join(f"{k} {v:.3f} s" for k, v in p.get("host_launch_seconds_per_batch", {}).items())
        if launch:
            print(f"  host time to queue a batch's kernels (the GPU waits if it nears the batch's time): {launch}")
    if "t5" in phases:
        t = phases["t5"]
        print(f"\nT5 (d_model {t['d_model']}, {t['precision']}) over {t['prompts']} prompts ({t['distinct']} distinct, "
              f"{t['tokens_per_prompt']:.0f} tokens each on average):\n"
              f"  per distinct prompt: Cosmos' padded call {t['reference_s_per_distinct'] * 1e3:.2f} ms, ours (alone, "
              f"own length) {t['per_prompt_s_per_distinct'] * 1e3:.2f} ms = {t['speedup_vs_reference']:.1f}x faster; "
              f"max rel-L2 to the padded rows {t['max_rel_l2_vs_reference']:.2g}\n"
              f"  in the build (PromptCache, dedup): {t['build_s_per_sample'] * 1e3:.2f} ms/sample")
    builds = {k: phases[k] for k in ("perception", "rgb", "rgb_device", "long", "i2v") if k in phases}
    builds.update({f"perception x{n}": r for n, r in phases.get("scaling", {}).items() if str(n) != "1"})
    if builds:
        _builds_table(builds, phases.get("pure"))
    if "sha" in phases:
        s = phases["sha"]
        print(f"\nsubset shards (units 0-1) equal across {list(s['digests'])} GPU counts: {s['all_shards_equal']}; "
              f"SHA256SUMS equal: {s['sha256sums_equal']}")
        for n, d in s["digests"].items():
            for name, digest in d["shards"].items():
                print(f"  {n} GPU(s)  {digest}  {name}")
    for name, error in results["errors"].items():
        print(f"\nERROR in phase {name}: {error}")


def _builds_table(builds: dict[str, dict[str, Any]], pure: dict[str, Any] | None) -> None:
    print(f"\n{'build':<16} {'gpus':>4} {'samples/s':>9} {'vs pure':>7} {'eff':>5} {'cpu core-s/s':>12} "
          f"{'wait s/s':>8} {'T5 s/s':>7} {'GPU GiB':>7} {'units':>5} {'window s':>8}  note")
    for name, b in builds.items():
        steady = b["steady"]
        rate = steady.get("samples_per_s")
        reference = None
        if "pure" in b and rate:  # a build that measured its own pure encode (i2v)
            reference = b["pure"]["samples_per_s"] * b["gpus"]
        elif pure and rate:
            key = "samples_per_s_rgb" if name.startswith(("rgb", "long")) else "samples_per_s_all_modalities"
            reference = pure[key] * b["gpus"]
        ranks = b["ranks"]
        wait = _mean([r["encoder_wait_s_per_sample"] for r in ranks])
        text = _mean([r["text_s_per_sample"] for r in ranks])
        gpu = max((r["peak_gpu_gib"] or 0 for r in ranks), default=None)
        note = steady.get("error", "") + (" dataset exhausted" if b.get("dataset_exhausted") else "")
        print(f"{name:<16} {b['gpus']:>4} {_f(rate):>9} {_f(rate / reference if reference else None, '.2f'):>7} "
              f"{_f(b.get('efficiency'), '.2f'):>5} {_f(steady.get('cpu_core_s_per_sample'), '.2f'):>12} "
              f"{_f(wait):>8} {_f(text, '.4f'):>7} {_f(gpu, '.1f'):>7} {b['units_staged']:>5} "
              f"{_f(steady.get('window_s'), '.0f'):>8}  {note}")
    print("  (wait, T5: per sample over the whole run from the rank stats; samples/s and CPU: steady window only)")
    for name, b in builds.items():
        steady = b["steady"]
        if "decode_workers_core_s_per_sample" in steady:
            print(f"  CPU core-s per sample {name}: decode workers "
                  f"{steady['decode_workers_core_s_per_sample']:.2f}, main and rank processes "
                  f"{steady['encoder_processes_core_s_per_sample']:.2f}")
    for name, b in builds.items():
        rss = b["steady"].get("rss", {})
        if rss:
            parts = [f"{role} {v['first_mib']:.0f}->{v['last_mib']:.0f} MiB ({v['growth_mib_per_min']:+.1f}/min)"
                     for role, v in rss.items() if role != "main" or b["gpus"] > 1]
            print(f"  private RSS {name}: " + "; ".join(parts))


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None
