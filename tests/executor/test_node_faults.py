"""The node-fault rule of the Ray run stats: a node excluded by its node check, or one whose decode failures are
at least DECODE_FAULT_MIN and DECODE_FAULT_RATIO times the rate of the other nodes."""

from __future__ import annotations

from latentforge.executor.node_faults import DECODE_FAULT_MIN, DECODE_FAULT_RATIO, node_faults
from latentforge.executor.rank_stats import RankStats
from latentforge.executor.ray.nodes import NodeBook


def _rank(rank: int, node: str, samples: int, failures: int = 0, check: str = "") -> RankStats:
    stats = RankStats(rank=rank, pid=100 + rank, device="cpu", workers=0, samples=samples, node=node,
                      node_check=check)
    if failures:
        stats.rejects = {"decode_error": failures - failures // 2, "unreadable": failures // 2, "too_short": 7}
    return stats


def test_rule_constants_are_the_documented_ones():
    assert (DECODE_FAULT_MIN, DECODE_FAULT_RATIO) == (3, 4.0)


def test_node_failing_far_more_than_the_rest_is_a_fault():
    ranks = [_rank(0, "a", 20, failures=10), _rank(1, "b", 40, failures=2), _rank(2, "b", 40)]
    [fault] = node_faults(ranks)  # a: 50 %; b: 2.5 %
    assert fault["node"] == "a" and fault["kind"] == "decode_failures"
    assert fault["detail"].startswith("10 of 20 samples failed to decode on this node (50%), 2% on the other")


def test_bad_files_failing_everywhere_are_not_a_node_fault():
    assert node_faults([_rank(0, "a", 20, failures=5), _rank(1, "b", 20, failures=4)]) == []  # 25 % vs 20 %


def test_too_few_failures_or_nothing_to_compare_is_not_a_fault():
    assert node_faults([_rank(0, "a", 4, failures=DECODE_FAULT_MIN - 1), _rank(1, "b", 40)]) == []
    assert node_faults([_rank(0, "a", 10, failures=9)]) == []  # the only node that ran samples
    assert node_faults([_rank(0, "", 10, failures=9), _rank(1, "", 10)]) == []  # local ranks have no node


def test_excluded_node_is_listed_once_with_its_check():
    ranks = [_rank(0, "a", 0, check="dataset check failed for /d/x.mp4: ..."), _rank(2, "a", 0, check="again"),
             _rank(1, "b", 8)]
    assert node_faults(ranks) == [{"node": "a", "kind": "excluded",
                                   "detail": "dataset check failed for /d/x.mp4: ..."}]


def test_driver_prints_each_decode_fault_once():
    book = NodeBook(ray=None, num_gpus=0)
    ranks = [_rank(0, "a", 20, failures=10), _rank(1, "b", 40)]
    [line] = book.new_decode_faults(ranks)
    assert line.startswith("node fault: Ray node a: 10 of 20 samples failed to decode")
    assert book.new_decode_faults(ranks) == []
