"""The polisher's group split (heuristics/joint_polish.py, ``_GroupSplit``): the best split of a few stages' nodes
among them, against brute force; its compiled search (heuristics/_groupsplit.c) against the Python one."""

from __future__ import annotations

import itertools
import math
import os
import random

import pytest
from milp_partition.heuristics import joint_polish
from test_joint_io import GIB

from milp_partition.budget import Budget
from milp_partition.joint.generators import parallel_branches
from milp_partition.joint.problem import JointProblem

# setup.py builds the extension where a C compiler is (CI has one); MILP_PARTITION_NO_C=1 says it may be missing
compiled = pytest.mark.skipif(
    joint_polish._native is None and os.environ.get("MILP_PARTITION_NO_C") == "1", reason="built without C on purpose"
)


def test_the_compiled_group_split_is_built() -> None:
    """A fresh install (README command 2) builds the extension; only MILP_PARTITION_NO_C=1 says it may be missing."""
    if os.environ.get("MILP_PARTITION_NO_C") == "1":
        pytest.skip("MILP_PARTITION_NO_C=1")
    assert joint_polish._native is not None, "milp_partition.heuristics._groupsplit did not build (is a C compiler installed?)"


def _search(problem: JointProblem, stages: int, seed: int) -> joint_polish._Search:
    """A search whose stages are ``stages`` runs of a topological order, each with a random ``(d, t)``."""
    rng = random.Random(seed)
    model = joint_polish._Model(problem)
    order = joint_polish._topological(model)
    cuts = sorted(rng.sample(range(1, len(order)), stages - 1))
    runs = [order[a:b] for a, b in itertools.pairwise([0, *cuts, len(order)])]
    shapes = [(1, 1), (2, 1), (1, 2)]
    return joint_polish._Search(model, [(frozenset(r), *rng.choice(shapes)) for r in runs], Budget.starting_now(60.0))


def _brute_force(search: joint_polish._Search, group: tuple[int, ...]) -> float:
    """The least slowest-stage time of the group over every split of its nodes that keeps every edge forward."""
    model = search.model
    where = search.stage_of()
    ys = search.ys()
    union = sorted(frozenset().union(*(search.stages[q][0] for q in group)))
    best = float("inf")
    for sides in itertools.product(range(len(group)), repeat=len(union)):
        place = dict(enumerate(where))
        place.update({v: group[q] for v, q in zip(union, sides)})
        if any(place[u] > place[v] for v in union for u, _ in model.preds[v]):
            continue
        if any(place[v] > place[u] for v in union for u, _ in model.succs[v]):
            continue
        parts = [frozenset(v for v, q in zip(union, sides) if q == r) for r in range(len(group))]
        if not all(parts):
            continue
        worst = max(model.stage(part, *search.stages[q][1:], ys[q]) for part, q in zip(parts, group))
        best = min(best, worst)
    return best


#: (branches, depth, devices, memory in GiB, stages, seed): graphs of 8 to 11 nodes
CASES = [(2, 3, 8, 1.0, 4, 0), (2, 3, 8, 0.5, 3, 1), (3, 3, 8, 2.0, 4, 2), (3, 2, 8, 0.75, 3, 3), (2, 4, 8, 1.0, 5, 4)]


@pytest.mark.parametrize("native", [False, True], ids=["python", "c"])
@pytest.mark.parametrize("case", CASES)
def test_the_group_split_finds_the_brute_force_optimum(case: tuple, native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if native and joint_polish._native is None:
        pytest.skip("built without C")  # test_the_compiled_group_split_is_built says whether that is allowed
    if not native:
        monkeypatch.setattr(joint_polish, "_native", None)
    branches, depth, devices, memory_gib, stages, seed = case
    search = _search(parallel_branches(branches, depth, devices, memory_gib * GIB, seed=seed), stages, seed)
    found_some = 0
    for size in (2, 3, 4):
        for group in itertools.combinations(range(stages), size):
            union = sum(len(search.stages[q][0]) for q in group)
            if size**union > 20_000:
                continue
            now = max(search.times[q] for q in group)
            best = _brute_force(search, group)
            split = joint_polish._GroupSplit(search, group)
            found = split.run()
            if best < now * (1 - 1e-9):  # a faster split exists: the search finds one as fast
                assert found is not None, group
                found_some += 1
            if found is not None:  # never one that only ties the group's slowest stage now
                assert split.best == pytest.approx(best, rel=1e-12) and split.best < now
                ys = search.ys()
                times = [search.model.stage(part, *search.stages[q][1:], ys[q]) for part, q in zip(found, group)]
                assert max(times) == pytest.approx(best, rel=1e-12)
                assert frozenset().union(*found) == frozenset().union(*(search.stages[q][0] for q in group))
    assert found_some > 0  # the cases hold groups that a split improves


def _groups(seed: int) -> list[tuple[joint_polish._Search, tuple[int, ...]]]:
    search = _search(parallel_branches(4, 5, 16, 2.0 * GIB, seed=seed), 5, seed)
    return [(search, g) for size in (2, 3, 4) for g in itertools.combinations(range(5), size)]


@compiled
@pytest.mark.parametrize("seed", range(4))
def test_the_compiled_search_finds_the_python_ones_split(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    visited = 0
    for search, group in _groups(seed):
        native = joint_polish._GroupSplit(search, group)
        got = native.run()
        with monkeypatch.context() as m:
            m.setattr(joint_polish, "_native", None)
            python = joint_polish._GroupSplit(search, group)
            want = python.run()
        assert got == want, group
        assert native.visits == python.visits  # the same branches, in the same order
        visited += joint_polish.GROUP_VISITS[len(group)] - python.visits
    assert visited > 4096  # long enough searches for the budget's checks to run


@compiled
def test_the_compiled_search_stops_on_a_spent_budget_and_passes_errors_on(monkeypatch: pytest.MonkeyPatch) -> None:
    groups = _groups(0)
    search, group = max(groups, key=lambda sg: len(frozenset().union(*(sg[0].stages[q][0] for q in sg[1]))))
    whole = joint_polish._GroupSplit(search, group)
    whole.run()
    assert whole.visits < joint_polish.GROUP_VISITS[len(group)] - 4096  # the search is past its first budget check
    search.budget = Budget.starting_now(0.0)
    cut = joint_polish._GroupSplit(search, group)
    cut.run()
    assert cut.visits == -1  # cut short at the first check (what it found before stands)

    def broken_clock() -> float:
        raise RuntimeError("clock failed")

    search.budget = Budget(60.0, 0.0, broken_clock)
    with pytest.raises(RuntimeError, match="clock failed"):
        joint_polish._GroupSplit(search, group).run()
    search.budget = Budget.starting_now(60.0)
    improved = next((sg for sg in groups if joint_polish._GroupSplit(*sg).run() is not None), None)
    assert improved is not None

    def fails(*_: object) -> None:
        raise RuntimeError("pricing failed")

    monkeypatch.setattr(joint_polish._GroupSplit, "_price", fails)
    with pytest.raises(RuntimeError, match="pricing failed"):
        joint_polish._GroupSplit(*improved).run()


@compiled
def test_the_compiled_search_refuses_arrays_of_the_wrong_size() -> None:
    import numpy as np

    ints, floats = np.zeros(2, dtype=np.int32), np.zeros(1)
    args = [ints, ints[:0], ints, ints[:0], ints, ints[:0], floats[:0], floats, floats, floats, floats, floats]
    args += [np.zeros(2), np.zeros(2), np.zeros(1, dtype=np.int32), floats]
    memory = np.ones(1)  # the cluster's kinds' memory: one kind
    assert joint_polish._native.split(*args, memory, 1.0, 10, lambda: 1.0, lambda: False) >= 0  # one node, one side
    with pytest.raises(ValueError, match="wrong size"):
        joint_polish._native.split(*args[:-1], np.zeros(3), memory, 1.0, 10, lambda: 1.0, lambda: False)
    with pytest.raises(ValueError, match="wrong size"):  # two kinds: the sides are devices of one kind
        joint_polish._native.split(*args, np.ones(2), 1.0, 10, lambda: 1.0, lambda: False)


@compiled
def test_the_stage_values_are_the_knapsacks_with_or_without_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """The polisher's stage times: the C knapsack's value (native.least_cost) and the Python one's agree, and the
    choice it builds plans from gives that time."""
    search, _ = _groups(1)[0]
    ys = search.ys()
    keys = [(nodes, d, t, y) for (nodes, d, t), y in zip(search.stages, ys)]
    keys += [
        (nodes, d, t, y)
        for nodes, _, _ in search.stages
        for d, t, y in ((1, 1, 1), (2, 1, 3), (1, 2, 8), (4, 1, 2), (1, 1, 64), (1, 1, 32))
    ]
    with_c = [joint_polish._Model(search.model.problem).stage(*key) for key in keys]
    python_model = joint_polish._Model(search.model.problem)
    with monkeypatch.context() as m:
        m.setattr(joint_polish.native, "least_cost", lambda *_: None)
        python = [python_model.stage(*key) for key in keys]
    assert any(map(math.isfinite, python)) and not all(map(math.isfinite, python))  # fits and misfits both
    assert with_c == pytest.approx(python, rel=1e-12)
    for key, value in zip(keys, python):
        cost, mem, crossing = python_model._knapsack(*key)
        choice = python_model.choice(*key)
        assert (choice == ()) == (not math.isfinite(value))
        if choice:
            assert math.fsum(cost[r, j] for r, j in enumerate(choice)) + crossing == pytest.approx(value, rel=1e-12)
            assert math.fsum(mem[r, j] for r, j in enumerate(choice)) <= search.model.problem.memory_bytes
