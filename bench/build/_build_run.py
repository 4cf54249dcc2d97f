"""Run `latentforge build` as a child process and measure it from outside, in steady state.

How steady state is measured (documented in bench/build/build.py too): the build runs on a dataset larger than
the time allows; every `tick` seconds we record which staged units have appeared (their `.done.json`
sidecar's mtime is the moment the unit was staged) and, with psutil, the CPU times and RSS of the main
process, each rank and each decode worker. After `warmup + duration` seconds the build gets SIGTERM (it
stops cleanly and would resume). Throughput is the least-squares slope of cumulative staged samples against
staging time over the events after the warm-up, which is unbiased for several ranks whose unit
completions interleave; CPU core-seconds per sample are the tree's CPU-time growth over the same window
divided by the samples staged in it. The per-rank clocks (encoder wait, text, peak GPU memory) come from
ROOT/build/stats-<utc>.json, which the build writes on SIGTERM too; those cover the whole run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

_SIDECAR = ".h5.done.json"
_RETIRED = ".committed.json"  # a unit whose commit took its arrays (staging/staged_units.py)
_STOP_GRACE_SECONDS = 60.0


@dataclass
class Tick:
    unix: float
    cpu_seconds: float  # user + system of the whole process tree
    rss: dict[str, int]  # "main", "rank<i>", "workers<i>" -> private resident bytes (RSS minus shared pages)
    worker_cpu_seconds: float = 0.0  # of it, the decode workers' (the rest: the main process and the ranks)


@dataclass
class BuildRun:
    name: str
    root: str
    ranks: int
    unit_size: int
    planned: int
    started_unix: float
    ended_unix: float = 0.0
    exit_code: int | None = None
    stopped_by_bench: bool = False
    events: list[tuple[float, int, int]] = field(default_factory=list)  # (staged unix, unit, samples)
    ticks: list[Tick] = field(default_factory=list)
    stats: dict[str, Any] | None = None
    output_tail: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _tree_roles(main: psutil.Process, inline: bool) -> dict[str, list[psutil.Process]]:
    """main / rank<i> / workers<i>. One slot: the main process is rank 0 and its spawn children decode."""
    roles: dict[str, list[psutil.Process]] = {"main": [main]}
    spawned = _spawned_children(main)
    if inline:
        roles["rank0"] = [main]
        roles["workers0"] = spawned
        return roles
    for i, rank in enumerate(sorted(spawned, key=lambda p: p.create_time())):
        roles[f"rank{i}"] = [rank]
        roles[f"workers{i}"] = _spawned_children(rank)
    return roles


def _spawned_children(process: psutil.Process) -> list[psutil.Process]:
    """Children started by multiprocessing's spawn (ranks, decode workers), not its resource tracker."""
    found = []
    try:
        for child in process.children():
            try:
                if "spawn_main" in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.Error:
                continue
    except psutil.Error:
        pass
    return found


def _tick(main: psutil.Process, inline: bool) -> Tick:
    cpu, workers, rss = 0.0, 0.0, {}
    seen: set[int] = set()
    for role, processes in _tree_roles(main, inline).items():
        total = 0
        for process in processes:
            try:
                with process.oneshot():
                    memory = process.memory_info()
                    total += memory.rss - memory.shared  # private: the frame slots are shared by every worker
                    if process.pid not in seen:
                        times = process.cpu_times()
                        cpu += times.user + times.system
                        workers += times.user + times.system if role.startswith("workers") else 0.0
                        seen.add(process.pid)
            except psutil.Error:
                continue
        rss[role] = total
    return Tick(time.time(), cpu, rss, workers)


def _new_events(staging: Path, known: set[int], unit_size: int, planned: int) -> list[tuple[float, int, int]]:
    """(time, unit, samples) of each unit staged since the last look: its sidecar's time, or, for a unit its build's
    commit already retired (a build that ran to its end between two looks), the time of its record."""
    found = []
    if not staging.is_dir():
        return found
    marks = [(p, p.name[len("unit-"):-len(_SIDECAR)]) for p in staging.glob(f"unit-*{_SIDECAR}")]
    marks += [(p, p.name[len("unit-"):-len(_RETIRED)]) for p in staging.glob(f"unit-*{_RETIRED}")]
    for sidecar, number in marks:
        unit = int(number)
        if unit in known:
            continue
        try:
            mtime = sidecar.stat().st_mtime
        except FileNotFoundError:
            continue
        known.add(unit)
        found.append((mtime, unit, min(unit_size, planned - unit * unit_size)))
    return found


def run_build(name: str, config_file: Path, root: Path, ranks: int, unit_size: int, planned: int,
              deadline_s: float | None, tick_s: float, log: Path, overwrite: bool = True) -> BuildRun:
    """Run the CLI on `config_file`; SIGTERM it after `deadline_s` (None: let it finish). Without
    `overwrite` the build resumes from what ROOT already holds."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = src + os.pathsep + child_env.get("PYTHONPATH", "")
    command = [sys.executable, "-m", "latentforge.cli.main", "build", "--config", str(config_file), "--quiet",
               *(["--overwrite"] if overwrite else [])]
    run = BuildRun(name, str(root), ranks, unit_size, planned, time.time())
    known: set[int] = set()
    with open(log, "w", encoding="utf-8") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=child_env)
        main = psutil.Process(child.pid)
        staging = root / "build" / "staging"
        while child.poll() is None:
            run.events += _new_events(staging, known, unit_size, planned)
            run.ticks.append(_tick(main, inline=ranks == 1))
            if deadline_s is not None and time.time() - run.started_unix >= deadline_s and not run.stopped_by_bench:
                run.stopped_by_bench = True
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(_STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    child.kill()  # its ranks and decode workers follow by PR_SET_PDEATHSIG
                break
            time.sleep(tick_s)
        run.exit_code = child.wait()
    run.ended_unix = time.time()
    run.events = sorted(run.events + _new_events(staging, known, unit_size, planned))
    run.output_tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
    stats_files = sorted((root / "build").glob("stats-*.json"))
    if stats_files:
        run.stats = json.loads(stats_files[-1].read_text(encoding="utf-8"))
    return run


def run_build_in_process(name: str, config_file: Path, root: Path, ranks: int, unit_size: int, planned: int,
                         log: Path, overwrite: bool = True) -> BuildRun:
    """run_build's record of the same command run to its end through the CLI's main() in this process, its output
    in `log`: for a build no one measures from outside (--tiny's subset commits), where a process start would cost
    more than the build."""
    import contextlib

    from latentforge.cli.main import main as cli_main

    run = BuildRun(name, str(root), ranks, unit_size, planned, time.time())
    with open(log, "w", encoding="utf-8") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        run.exit_code = cli_main(["build", "--config", str(config_file), "--quiet",
                                  *(["--overwrite"] if overwrite else [])])
    run.ended_unix = time.time()
    run.events = sorted(_new_events(root / "build" / "staging", set(), unit_size, planned))
    run.output_tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
    stats_files = sorted((root / "build").glob("stats-*.json"))
    if stats_files:
        run.stats = json.loads(stats_files[-1].read_text(encoding="utf-8"))
    return run


def _slope(xs: list[float], ys: list[float]) -> float:
    xs = [x - xs[0] for x in xs]  # unix times are ~1.7e9: centre them before squaring
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var > 0 else float("nan")


def steady_state(run: BuildRun, warmup_s: float) -> dict[str, Any]:
    """Samples/s, CPU core-s/sample and RSS trends over the events staged after the warm-up."""
    start = run.started_unix + warmup_s
    window = [e for e in run.events if e[0] >= start]
    result: dict[str, Any] = {"events_in_window": len(window), "warmup_s": warmup_s}
    if len(window) < 3:
        result["error"] = (f"only {len(window)} units staged after the {warmup_s:.0f} s warm-up "
                           f"({len(run.events)} in all); raise --duration or lower --warmup/--unit-size")
        return result
    times = [e[0] for e in window]
    cumulative = [sum(e[2] for e in window[: i + 1]) for i in range(len(window))]
    rate = _slope(times, cumulative)
    t0, t1 = times[0], times[-1]
    result.update(samples_per_s=rate, window_s=t1 - t0, samples_in_window=cumulative[-1] - cumulative[0])
    ticks = [t for t in run.ticks if t0 <= t.unix <= t1]
    if len(ticks) >= 2:
        cpu = ticks[-1].cpu_seconds - ticks[0].cpu_seconds
        workers = ticks[-1].worker_cpu_seconds - ticks[0].worker_cpu_seconds
        samples = rate * (ticks[-1].unix - ticks[0].unix)
        result["cpu_core_s_per_sample"] = cpu / samples
        result["decode_workers_core_s_per_sample"] = workers / samples
        result["encoder_processes_core_s_per_sample"] = (cpu - workers) / samples
        result["rss"] = _rss_trends(ticks)
    return result


def _rss_trends(ticks: list[Tick]) -> dict[str, dict[str, float]]:
    """Per role: first and last RSS in the window, max, and the least-squares growth in MiB per minute."""
    trends = {}
    roles = sorted({role for t in ticks for role in t.rss})
    for role in roles:
        points = [(t.unix, t.rss[role]) for t in ticks if role in t.rss and t.rss[role] > 0]
        if len(points) < 2:
            continue
        xs, ys = [p[0] for p in points], [p[1] / 2**20 for p in points]
        trends[role] = {"first_mib": ys[0], "last_mib": ys[-1], "max_mib": max(ys),
                        "growth_mib_per_min": _slope(xs, ys) * 60, "samples": len(points)}
    return trends


def rank_clocks(run: BuildRun) -> list[dict[str, Any]]:
    """Per rank from the stats file: samples, encoder wait / text / encode seconds per sample, peaks."""
    rows = []
    for rank in (run.stats or {}).get("ranks", []):
        samples = rank.get("samples") or 0
        seconds = rank.get("seconds", {})

        def per(key: str, seconds=seconds, samples=samples) -> float | None:
            return seconds[key] / samples if samples and key in seconds else None

        rows.append({
            "rank": rank["rank"], "device": rank["device"], "samples": samples, "units": rank.get("units"),
            "encoder_wait_s_per_sample": per("encoder_wait"), "text_s_per_sample": per("text"),
            "encode_s_per_sample": per("encode"), "decode_s_per_sample": per("decode"),
            "cpu_core_s_per_sample_whole_run": rank["cpu_seconds"] / samples if samples else None,
            "peak_host_gib": rank.get("peak_host_bytes", 0) / 2**30,
            "peak_gpu_gib": rank["peak_gpu_bytes"] / 2**30 if rank.get("peak_gpu_bytes") else None,
        })
    return rows
