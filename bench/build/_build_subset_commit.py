"""The sha phase of bench/build/build.py: units 0 and 1 staged by each perception run (one per N of --gpus-list)
copied, with that run's record of its models, into a fresh root and committed there by a resume, so the shards hold
exactly what that run's ranks encoded; every run's shards and SHA256SUMS must then be the same bytes.

`bench` is build.py's Bench: its args, its finished runs by name and its config_file().
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import _build_run as runner


def sha(bench) -> dict[str, Any]:
    """The sha phase: every --gpus-list run's subset commit, and whether their shards and SHA256SUMS are equal."""
    digests = {}
    for n in bench.args.gpus_list:
        source = bench.runs.get("perception" if n == 1 else f"perception-{n}gpu")
        if source is None:
            raise RuntimeError(f"no {n}-GPU perception run in this invocation to take staged units from")
        digests[n] = subset_commit(bench, source, n)
    base = digests[bench.args.gpus_list[0]]
    return {"digests": digests,
            "all_shards_equal": all(d["shards"] == base["shards"] for d in digests.values()),
            "sha256sums_equal": all(d["sha256sums"] == base["sha256sums"] for d in digests.values())}


def subset_commit(bench, source: runner.BuildRun, gpus: int) -> dict[str, Any]:
    """Units 0 and 1 that `source` staged (or retired) committed in a fresh root by a resume; its shards' digests."""
    from latentforge.cache.layout import MODEL_EMPTY_PROMPT, MODEL_RECORD, SHARD_DIGESTS
    from latentforge.hashing import sha256_file

    a = bench.args
    name = f"subset-{gpus}"
    path, root = bench.config_file(name, gpus, False, 2 * a.unit_size)
    if root.exists():
        shutil.rmtree(root)
    staging = root / "build" / "staging"
    staging.mkdir(parents=True)
    (root / "build" / "lock").touch()  # build records of latentforge's: a root it may write
    retired = False
    for unit in (0, 1):
        staged = Path(source.root) / "build" / "staging" / f"unit-{unit:06d}.h5"
        if staged.is_file():  # a run stopped before its commit
            for suffix in ("", ".done.json"):
                shutil.copy2(staged.with_name(staged.name + suffix), staging)
        else:  # a run that ran to its end retired its units: their rows are read back from its shards
            shutil.copy2(staged.with_name(f"unit-{unit:06d}.committed.json"), staging)
            retired = True
    if retired:
        shutil.copytree(Path(source.root) / "shards", root / "shards")
        shutil.copy2(Path(source.root) / "build" / SHARD_DIGESTS, root / "build")
    # with the record of the models that run's ranks encoded with (and its empty prompt), as a resume has it:
    # without it the commit loads the tokenizer and text model only to describe them again
    for record in (MODEL_RECORD, MODEL_EMPTY_PROMPT):
        if (Path(source.root) / "build" / record).is_file():
            shutil.copy2(Path(source.root) / "build" / record, root / "build")
    log = a.out / "logs" / f"{name}.log"
    if a.tiny:  # nothing of it is measured: the CLI's main() here, without a process start that costs seconds
        run = runner.run_build_in_process(name, path, root, gpus, a.unit_size, 2 * a.unit_size, log,
                                          overwrite=False)
    else:
        run = runner.run_build(name, path, root, gpus, a.unit_size, 2 * a.unit_size, None, a.tick, log,
                               overwrite=False)
    if run.exit_code != 0:
        raise RuntimeError(f"subset commit from {source.name} exited {run.exit_code}:\n{run.output_tail}")
    shards = {p.name: sha256_file(p) for p in sorted((root / "shards").glob("*.h5"))}
    encoded = (run.stats or {}).get("samples_encoded_this_run")
    if encoded:
        raise RuntimeError(f"the subset build encoded {encoded} samples itself instead of committing the "
                           f"units staged by {source.name}; see {a.out / 'logs' / (name + '.log')}")
    return {"from_run": source.name, "shards": shards,
            "sha256sums": sha256_file(root / "SHA256SUMS")}
