"""Issue 40, the hetero search's tree in C (:meth:`milp_partition.hetero.search._Triple.tree`, ``tree_run`` in
``milp_partition/hetero/_hetero.c``) against its Python form (:meth:`~milp_partition.hetero.search._Triple.rec`).

The C tree repeats rec's double operations in the same order and asks Python for the rest at the same points, so the
two must explore the same tree: the same node and leaf counts, the same value, bound and unresolved leaves, on every
path rec has (cap levels and device floors from the first node, the Lagrangian rows, the crossing bound of a region
search, phase 1's balanced order and node cap, a clock that runs out in the middle of a tree)."""

from __future__ import annotations

import itertools
import math

import pytest

from milp_partition.budget import Budget
from milp_partition.hetero import native
from milp_partition.hetero import search as hs
from milp_partition.hetero.pool import device_split, pooled_problem, region_groups
from milp_partition.hetero.pooled import pool_regions
from milp_partition.hetero.problem import HeteroProblem
from milp_partition.hetero.search import SearchOutcome, search
from tests.test_hetero import HETERO, _tiny

pytestmark = [
    pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here"),
    pytest.mark.skipif(not native.tree_available(), reason="the C extension is not built (setup.py build_ext)"),
]


def _both(run: object, monkeypatch: pytest.MonkeyPatch) -> tuple[SearchOutcome, SearchOutcome]:
    """``run()`` with the C tree, then with rec (every other C loop on in both)."""
    assert callable(run)
    with_c = run()
    with monkeypatch.context() as mp:
        mp.setattr(hs, "NATIVE_TREE", False)
        with_py = run()
    return with_c, with_py


def _same(a: SearchOutcome, b: SearchOutcome) -> None:
    assert (a.nodes, a.leaves, a.triples, a.complete, a.stopped_by) == (b.nodes, b.leaves, b.triples, b.complete, b.stopped_by)
    assert a.value == b.value and a.bound == b.bound and a.unresolved == b.unresolved
    assert (a.plan is None) == (b.plan is None)
    if a.plan is not None and b.plan is not None:
        assert a.plan == b.plan


@pytest.mark.parametrize("objective", ["sailor", "sound"])
@pytest.mark.parametrize(("count", "blocks"), [(3, 3), (4, 5), (6, 5)])
def test_the_c_tree_explores_the_same_tree_as_rec(
    objective: str, count: int, blocks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tiny two-column settings, from no incumbent and from one just above the optimum; the cap levels and the device
    floors from the first node (their callbacks run inside the tree) and the Lagrangian rows on and off: the same
    nodes, leaves, value, bound and plan."""
    problem = _tiny(objective, count, blocks)
    nodes = 0
    for early, lagrange in itertools.product((False, True), (False, True)):
        with monkeypatch.context() as mp:
            if early:
                mp.setattr(hs, "LEVEL_AFTER_NODES", -1)
                mp.setattr(hs, "YSTAR_AFTER_NODES", -1)
            mp.setattr(hs, "LAGRANGE_BOUND", lagrange)
            mp.setattr(hs, "LAGRANGE_KEEP", -1.0)  # the tree keeps its Lagrangian rows wherever they exist
            for start in (math.inf, None):
                inc = start if start is not None else search(problem, Budget.starting_now(60.0)).value * 1.02
                a, b = _both(lambda inc=inc: search(problem, Budget.starting_now(60.0), inc), mp)
                _same(a, b)
                assert a.complete
                nodes += a.nodes
    assert nodes > 150


def _region(problem: HeteroProblem) -> SearchOutcome:
    split = device_split(problem)
    assert split is not None
    groups = region_groups(problem)
    return search(pooled_problem(problem, groups), Budget.starting_now(60.0), math.inf, None, split + 1, pool_regions(groups))


@pytest.mark.parametrize("objective", ["sailor", "sound"])
def test_the_c_tree_keeps_the_crossing_bound_of_a_region_search(objective: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The region search of a one-kind two-region setting (the crossing bound, the regions carried down the tree):
    the same tree in C and in rec."""
    from tests.test_hetero_pool import _zoned
    from tests.test_hetero_span import MID

    for counts, blocks, batch in MID:
        problem = _zoned(counts, blocks=blocks, global_batch=batch, objective=objective)
        a, b = _both(lambda problem=problem: _region(problem), monkeypatch)
        _same(a, b)
        assert a.complete and a.nodes > 20  # (the crossing bound prunes here: tests/test_hetero_span.py)


def test_the_c_tree_keeps_phase_one_and_its_node_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """opt350-a16-v16 from no incumbent with a node cap of 40 per triple in phase 1 (balanced ends first, triples cut at
    the cap and explored again in phase 2): the same tree in C and in rec."""
    from milp_partition.io.sailor import read_sailor

    problem = read_sailor(HETERO, setting="opt350-a16-v16")
    monkeypatch.setattr(hs, "PHASE1_NODES", 40)
    a, b = _both(lambda: search(problem, Budget.starting_now(3600.0)), monkeypatch)
    _same(a, b)
    assert a.complete and a.nodes > 200


def test_the_c_tree_stops_where_rec_stops_when_the_clock_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake clock that moves one millisecond per reading: the C tree reads it at the same points as rec (each node's
    start and every TICK ends), so both stop at the same node with the same bound; several limits, some of which
    stop inside a tree."""
    problem = _tiny("sailor", 6, 5)
    monkeypatch.setattr(hs, "TICK", 7)
    stopped = 0
    for limit_s in (0.04, 0.06, 0.08, 0.1, 0.2):
        runs = []
        for native_tree in (True, False):
            ticks = itertools.count()

            def clock(ticks: itertools.count[int] = ticks) -> float:
                return next(ticks) * 1e-3

            with monkeypatch.context() as mp:
                mp.setattr(hs, "NATIVE_TREE", native_tree)
                runs.append(search(problem, Budget.starting_now(limit_s, clock), math.inf))
        _same(*runs)
        stopped += runs[0].stopped_by == "time_limit" and runs[0].nodes > 0
    assert stopped >= 3
