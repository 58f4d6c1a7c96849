"""The crossing bound of the region search (:meth:`milp_partition.hetero.search._Triple.span_lb`) against brute force.

Where every plan a search covers must span two regions (its ``min_devices`` above every region's devices), a node whose
decided stages stay in one region is bounded with the crossing its completion must make.  On tiny settings of one kind
in two regions, every plan enumerated: the region search's bound must stay at most every plan of more than N_A devices
(the larger region's), with the bound on and off; the bound must prune; and two broken variants must be caught (the
bound used where plans need not span, the crossing charged at the first boundary only)."""

from __future__ import annotations

import math

import pytest

from milp_partition.budget import Budget
from milp_partition.hetero import search as search_module
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.pool import device_split, pool_groups, pooled_problem, region_groups
from milp_partition.hetero.pooled import pool_regions
from milp_partition.hetero.problem import HeteroProblem
from milp_partition.hetero.search import SearchOutcome, search
from tests.test_hetero import HETERO, _plans
from tests.test_hetero_pool import _zoned
from tests.test_hetero_split import SHAPES, SPLIT, _by_devices, _devices

pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")

OBJECTIVES = ["sailor", "sound"]


def _cases() -> list[tuple[HeteroProblem, int]]:
    out = []
    for counts in SPLIT:
        for blocks, batch in SHAPES:
            for objective in OBJECTIVES:
                problem = _zoned(counts, blocks=blocks, global_batch=batch, objective=objective)
                split = device_split(problem)
                assert split is not None
                out.append((problem, split))
    return out


CASES = _cases()


def _region_search(problem: HeteroProblem, min_devices: int) -> SearchOutcome:
    """The region pools' search with no incumbent, its plans restricted to ``min_devices`` devices, the regions given."""
    groups = region_groups(problem)
    return search(pooled_problem(problem, groups), Budget.starting_now(60.0), math.inf, None, min_devices, pool_regions(groups))


def _least_pooled_above(problem: HeteroProblem, split: int) -> float:
    """The least seconds of a plan of the region pools with more than ``split`` devices (brute force; inf: none)."""
    pooled = pooled_problem(problem, region_groups(problem))
    vals = [evaluate(pooled, p).iteration_s for p in _plans(pooled) if _devices(p) > split]
    return min(vals, default=math.inf)


def test_pool_regions_names_each_region_pool_and_refuses_a_pool_across_regions() -> None:
    """The region pools map to their regions; the one pool per kind spans two regions, so it has none."""
    problem, _split = CASES[0]
    assert pool_regions(region_groups(problem)) == {"pooled:us-central1": "us-central1", "pooled:us-west1": "us-west1"}
    assert pool_regions(pool_groups(problem)) is None


def test_the_regions_reach_the_search_and_apply_only_above_every_region() -> None:
    """The crossing bound is used only where a plan cannot stay in one region: ``min_devices`` above every region's."""
    problem, split = CASES[0]
    groups = region_groups(problem)
    pooled = pooled_problem(problem, groups)
    srch = search_module._Search(pooled, Budget.starting_now(10.0), math.inf, None)
    tb = search_module._Tables(pooled, 1)
    srch.regions = pool_regions(groups)
    srch.min_devices = split + 1
    assert srch.span_columns(tb) is not None
    srch.min_devices = split
    assert srch.span_columns(tb) is None
    srch.min_devices, srch.regions = split + 1, None
    assert srch.span_columns(tb) is None


@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_region_search_stays_below_every_plan_of_more_devices(case: int) -> None:
    """Complete and with no incumbent, the region search's bound is at most every region-pooled plan of more than N_A
    devices and every plan of the setting of more (a bound above one would be a false proof); the same with the
    crossing bound off."""
    problem, split = CASES[case]
    _small, big = _by_devices(problem, split)
    pooled_big = _least_pooled_above(problem, split)
    for flag in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(search_module, "SPAN_BOUND", flag)
            got = _region_search(problem, split + 1)
        assert got.complete
        assert got.bound <= pooled_big * (1 + 1e-12)
        assert got.bound <= big * (1 + 1e-12)


def test_the_crossing_bound_prunes() -> None:
    """Pruning at a threshold below every region-pooled plan (as the solve's region search does, at the stop gap), the
    region searches visit fewer nodes in all with the crossing bound than without (with no incumbent it may visit
    more: the plans that stay in one region, which it drops, no longer prune as incumbents)."""
    nodes = {True: 0, False: 0}
    for problem, split in CASES:
        pooled = pooled_problem(problem, region_groups(problem))
        want = 0.99 * min(evaluate(pooled, p).iteration_s for p in _plans(pooled))
        for flag in nodes:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(search_module, "SPAN_BOUND", flag)
                groups = region_groups(problem)
                pooled = pooled_problem(problem, groups)
                got = search(pooled, Budget.starting_now(60.0), want, None, split + 1, pool_regions(groups))
                assert got.complete
                nodes[flag] += got.nodes
    assert nodes[True] < nodes[False]


def test_the_bound_used_where_plans_need_not_span_is_a_false_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broken variant: the crossing bound in a search of every plan (``min_devices`` 0).  On some tiny setting its
    bound is then above the optimum, a plan that stays in one region: the condition on ``min_devices`` is what makes it
    sound."""

    def any_search(self: search_module._Search, tb: search_module._Tables) -> list[int] | None:
        regions = self.regions
        if regions is None:
            return None
        names = sorted({regions[c.zone] for c in tb.cols})
        return [names.index(regions[c.zone]) for c in tb.cols] if len(names) > 1 else None

    monkeypatch.setattr(search_module._Search, "span_columns", any_search)
    caught = 0
    for problem, _split in CASES:
        want = min(evaluate(problem, p).iteration_s for p in _plans(problem))
        caught += _region_search(problem, 0).bound > want * (1 + 1e-9)
    assert caught > 0


#: Settings of 8-9 devices where the crossing bound prunes (too many plans to enumerate): one kind in two regions.
MID = [
    ({"A100-40_us-central1-a": 6, "A100-40_us-west1-b": 3}, 6, 256),
    ({"A100-40_us-central1-a": 3, "A100-40_us-central1-b": 3, "A100-40_us-west1-b": 2}, 6, 256),
]


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("mid", range(len(MID)))
def test_the_crossing_bound_keeps_the_best_spanning_plan(mid: int, objective: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On settings too large to enumerate: the region search with the crossing bound ends at the same value as with
    that bound never pruning (the plans that stay in one region dropped in both), in fewer nodes; a bound that pruned
    the best spanning plan would end above it."""
    counts, blocks, batch = MID[mid]
    problem = _zoned(counts, blocks=blocks, global_batch=batch, objective=objective)
    split = device_split(problem)
    assert split is not None
    got = _region_search(problem, split + 1)
    monkeypatch.setattr(search_module._Triple, "span_lb", lambda self, *args: -math.inf)
    monkeypatch.setattr(search_module, "NATIVE_TREE", False)  # rec, whose span_lb is replaced (C = rec: test_hetero_tree)
    ref = _region_search(problem, split + 1)
    assert got.complete and ref.complete
    assert got.value == pytest.approx(ref.value, rel=1e-12) and got.bound == pytest.approx(ref.bound, rel=1e-12)
    assert got.nodes < ref.nodes
