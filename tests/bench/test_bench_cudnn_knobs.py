"""bench/_cudnn_knobs.py: which knob values conv_kernels.py --knobs tries, and how refused combinations are
skipped (a stand-in for cuDNN's graph: the real one needs a GPU and the cudnn frontend)."""

import enum
from types import SimpleNamespace

from helpers.bench_scripts import load_bench


class Knob(enum.Enum):
    TILE_SIZE = 2
    SPLIT_K_BUF = 5
    WORKSPACE = 13
    TILE_CGA_M = 14


def info(knob, low, high, stride=1):
    return SimpleNamespace(type=knob, min_value=low, max_value=high, stride=stride)


ENGINE_KNOBS = [info(Knob.TILE_SIZE, 0, 5), info(Knob.SPLIT_K_BUF, 1, 2048), info(Knob.WORKSPACE, 0, 1),
                info(Knob.TILE_CGA_M, 1, 16)]


def test_knob_axes_search_tiles_whole_clusters_by_powers_and_huge_ranges_by_the_heuristics_values():
    knobs = load_bench("_cudnn_knobs")
    axes = knobs.knob_axes(ENGINE_KNOBS, {"SPLIT_K_BUF": {4, 1}})
    assert {axis.name: axis.values for axis in axes} == {
        "TILE_SIZE": (0, 1, 2, 3, 4, 5), "SPLIT_K_BUF": (1, 4), "WORKSPACE": (0,), "TILE_CGA_M": (1, 2, 4, 8)}
    overridden = knobs.knob_axes(ENGINE_KNOBS, {}, {"TILE_SIZE": (3, 99)})
    assert overridden[0].values == (3,) and overridden[1].values == (1,)  # out-of-range values dropped
    assert len(list(knobs.combinations(axes))) == 6 * 2 * 1 * 4


class FakeGraph:
    """Lists one plan of engine 62; refuses odd tile sizes at creation and cluster 8 when run."""

    def __init__(self):
        self.configs = [(62, {Knob.TILE_SIZE: 0, Knob.SPLIT_K_BUF: 1, Knob.WORKSPACE: 0, Knob.TILE_CGA_M: 1})]

    def get_knobs_for_engine(self, engine):
        return ENGINE_KNOBS

    def get_execution_plan_count(self):
        return len(self.configs)

    def get_engine_and_knobs_at_index(self, index):
        return self.configs[index]

    def create_execution_plan(self, engine, knobs):
        if knobs[Knob.TILE_SIZE] % 2:
            raise RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")
        self.configs.append((engine, dict(knobs)))

    def get_plan_name_at_index(self, index):
        engine, knobs = self.configs[index]
        return f"eng{engine}_" + "_".join(f"k{knob.value}={value}" for knob, value in knobs.items())


def test_knob_plans_times_what_builds_and_marks_what_the_heuristics_listed():
    knobs = load_bench("_cudnn_knobs")
    graph = FakeGraph()
    listed = {graph.get_plan_name_at_index(0)}

    def run_plan(index, reps):
        if graph.configs[index][1][Knob.TILE_CGA_M] == 8:
            raise RuntimeError("plan failed to build")
        return 0.001 * index

    rows, tried = knobs.knob_plans(graph, 62, listed, run_plan, budget_s=60)
    assert tried == 6 * 1 * 1 * 4  # SPLIT_K_BUF only at the listed value, WORKSPACE at 0
    assert len(rows) == 3 * 3  # even tile sizes, clusters 1, 2, 4
    assert [row["listed_by_heuristics"] for row in rows].count(True) == 1
    assert all(row["seconds"] == 0.001 * row["index"] for row in rows)
