"""A build with frames.buckets: after the shared plan and probe (which chose each sample's bucket), one
single-shape cache per bucket under ROOT/buckets/<F>x<H>x<W>/, each with its own run records, resume and
markers, in config order; then the root's rejects, index, SHA256SUMS and, last, its _CACHE_COMPLETE.

A rerun skips every bucket that is complete and resumes the others where they stopped, so a kill between or
inside buckets ends in the same bytes. An `--extend` grows each bucket that gains members as a single-shape cache is
grown (its old rows keep their place and bytes), builds one that gains its first, and leaves the others untouched.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections import Counter
from pathlib import Path

from ..cache.bucket_index import BucketEntry, BucketIndex
from ..cache.config_file import CacheConfig
from ..cache.generation_swap import finish_swap, waiting_folder
from ..cache.layout import COMPLETE_MARKER, RUN_RECORDS_DIR, bucket_path
from ..cache.rows import read_rejects
from ..config import BuildConfig
from ..config.buckets import Bucket, parse_buckets
from ..errors import DamagedFile, DamagedFileWarning, LatentforgeError
from ..pipeline.plan import plan_fingerprint, write_plan
from ..pipeline.probe import ProbeResult
from ..pipeline.run_record import read_run_record, set_aside_damaged_record
from ..records import Reject, Sample
from ..sinks.hdf5.bucket_commit import commit_bucketed_root
from ..staging.remote_staging import claim_staging
from .committed import committed_from, record_commit
from .encode_commit import encode_and_commit, remove_tmp_leftovers
from .extend import planned_units, unit_numbers
from .lock import BuildLock
from .placement import executor_for
from .progress import BuildProgress
from .reject_limit import reject_problem
from .resume import check_config, check_inputs, resume_key
from .run_stats import RunStats


@dataclasses.dataclass
class BucketedBuild:
    num_samples: int
    rejects_by_reason: dict[str, int]


def bucket_config(config: BuildConfig, root: Path, bucket: Bucket) -> BuildConfig:
    """The single-shape build of one bucket's cache."""
    staging_url = f"{config.output.staging_url.rstrip('/')}/{bucket_path(bucket.name)}" \
        if config.output.staging_url else ""
    output = dataclasses.replace(config.output, root=str(root / bucket_path(bucket.name)), staging_url=staging_url)
    return dataclasses.replace(config, frames=bucket.frames_config(config.frames), output=output)


def _bucket_of(probe: ProbeResult | Reject) -> str | None:
    return probe.bucket["name"] if isinstance(probe, ProbeResult) and probe.bucket else None


def _build_bucket(config: BuildConfig, members: list[Sample], probes: dict[int, ProbeResult | Reject],
                  progress: BuildProgress, stats: RunStats, earlier: tuple[list[Reject], int],
                  unit_of: dict[int, int], extended: bool) -> None:
    """One bucket's cache, resumed like any single-shape build (its own run.json, plan and staging); of an
    `extended` root, grown like one (its recorded members keep their units, the new ones get the units after) and
    left in its build/next, to move in with the root, which stays whole until then."""
    build_dir = Path(config.output.root) / RUN_RECORDS_DIR
    executor = executor_for(config, build_dir, progress.quiet)
    with BuildLock(build_dir):
        remove_tmp_leftovers(build_dir)
        set_aside_damaged_record(build_dir)  # the root's run.json holds the whole config
        key = resume_key(config)
        check_config(build_dir, key, may_differ=("config.dataset.path",) if extended else ())
        claim_staging(config.output, key, overwrite=False)
        check_inputs(build_dir, key, plan_fingerprint(members), may_grow=extended)
        write_plan(build_dir, members, [])
        encode_and_commit(config, executor, members, [], {s.source_index: probes[s.source_index] for s in members},
                          progress, stats, earlier, unit_of=unit_of, allow_empty=True, publish=not extended)


def _check_members_kept(bucket_root: Path, name: str, members: list[Sample]) -> None:
    """An extend only adds to a bucket: every sample its cache was planned with must still be among its members."""
    record = read_run_record(bucket_root / RUN_RECORDS_DIR)
    gone = sorted(set(record["inputs"]["entries"]) - {s.sample_id for s in members}) if record is not None else []
    if gone:
        more = f" and {len(gone) - 5} more" if len(gone) > 5 else ""
        raise LatentforgeError(f"--extend refused: {len(gone)} sample(s) of bucket {name} would now go to another "
                               f"bucket or be rejected (their sources or probe changed): "
                               f"{', '.join(map(repr, gone[:5]))}{more}. Restore their sources, or rebuild the root "
                               "with --overwrite")


def _up_to_date(bucket_root: Path, unit_of: dict[int, int], extended: bool) -> bool:
    """A complete bucket whose records are sound and, in an extended root, that was committed from its members as
    they are now: left as it is, its files untouched."""
    if not (bucket_root / COMPLETE_MARKER).is_file() or _records_damaged(bucket_root):
        return False
    return not extended or committed_from(bucket_root / RUN_RECORDS_DIR, planned_units(unit_of), [])


def _records_damaged(bucket_root: Path) -> bool:
    """Whether a finished bucket's cache_config.json or rejects.jsonl no longer parses (warned): it is then committed
    again from its staged units, which its own run.json vouches for."""
    try:
        CacheConfig.load(bucket_root)
        read_rejects(bucket_root)
    except DamagedFile as damaged:
        warnings.warn(f"{damaged.path} is damaged ({damaged.problem}); the bucket is committed again",
                      DamagedFileWarning, stacklevel=3)
        return True
    return False


def build_buckets(config: BuildConfig, root: Path, samples: list[Sample], plan_rejects: list[Reject],
                  probes: dict[int, ProbeResult | Reject], progress: BuildProgress, stats: RunStats,
                  segment_starts: tuple[int, ...] = (0,)) -> BucketedBuild:
    """`segment_starts`: where each extension of the root's plan starts (builder/extend.py); with more than one, a
    bucket that gains members is extended and one that gains none is left as it is."""
    extended = len(segment_starts) > 1
    finish_swap(root)  # a root's swap a kill cut short moves its buckets in: each is then where its records say
    probe_rejects = [p for p in probes.values() if isinstance(p, Reject)]
    root_rejects = sorted(plan_rejects, key=lambda r: r.sample_id) + probe_rejects
    candidates = len(samples) + len(plan_rejects)
    problem = reject_problem(candidates, root_rejects, config.run.max_reject_fraction, "by the plan and the probe")
    if problem is not None:
        raise LatentforgeError(problem)
    entries: list[BucketEntry] = []
    # Rejects so far: the root's, then every finished bucket's; each bucket counts them with its own against
    # every candidate of the build, so the limit holds across buckets however the rejects are spread.
    rejects = list(root_rejects)
    grown: list[tuple[BuildConfig, dict[int, int]]] = []  # buckets committed into their build/next
    for bucket in parse_buckets(config.frames):
        members = [s for s in samples if _bucket_of(probes[s.source_index]) == bucket.name]
        sub = bucket_config(config, root, bucket)
        bucket_root = Path(sub.output.root)
        if extended:
            _check_members_kept(bucket_root, bucket.name, members)
        if not members:
            entries.append(BucketEntry(bucket.name, *dataclasses.astuple(bucket), 0, None, None))
            continue
        unit_of = unit_numbers(members, config.output.unit_size, list(segment_starts))
        if not _up_to_date(bucket_root, unit_of, extended):
            _build_bucket(sub, members, probes, progress, stats, (rejects, candidates - len(members)), unit_of,
                          extended)
            grown += [(sub, unit_of)] if extended else []
        cache = CacheConfig.load(waiting_folder(bucket_root))
        rejects += read_rejects(waiting_folder(bucket_root))
        entries.append(BucketEntry(bucket.name, *dataclasses.astuple(bucket), cache.num_samples,
                                   bucket_path(bucket.name), tuple(cache.latent.shape)))
    problem = reject_problem(candidates, rejects, config.run.max_reject_fraction, "in all buckets")
    if problem is not None:  # buckets finished by an earlier run were not checked against this run's limit
        raise LatentforgeError(problem)
    reasons = Counter(r.reason for r in rejects)
    started = time.perf_counter()
    index = BucketIndex(tuple(entries), config.frames.bucket_upscale, len(root_rejects))
    if index.num_samples == 0:
        raise LatentforgeError(f"{root}: no bucket holds a sample ({candidates} planned, {len(rejects)} rejected); a "
                               "cache holds at least one sample")
    commit_bucketed_root(root, index, root_rejects)
    for sub, unit_of in grown:  # in place now: their commits are recorded and their staged units retired
        record_commit(sub, Path(sub.output.root) / RUN_RECORDS_DIR, planned_units(unit_of), [])
    stats.main_seconds["commit"] = stats.main_seconds.get("commit", 0.0) + time.perf_counter() - started
    return BucketedBuild(index.num_samples, dict(sorted(reasons.items())))
