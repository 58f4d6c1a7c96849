"""The joint DP's pass in C (milp_partition/joint/_jointdp.c) against the numpy pass, the exact knapsack and brute force."""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import numpy as np
import pytest

from milp_partition.io.piper import read_joint
from milp_partition.joint import native
from milp_partition.joint.dp import JointDP, joint_data, search
from milp_partition.joint.knapsack import min_cost_exact
from milp_partition.joint.problem import JointSolveSettings
from milp_partition.joint.schedule import JointSchedule
from milp_partition.joint.solve import solve_joint
from tests.test_joint_bruteforce import brute_force, random_problem, repeated_chain, repeated_diamonds

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "joint"
GIB = 2**30

# setup.py builds the extension where a C compiler is (CI has one); a build without it runs the numpy pass
needs_c = pytest.mark.skipif(
    not native.available() and os.environ.get("MILP_PARTITION_NO_C") == "1", reason="built without the C pass on purpose"
)


def test_the_c_pass_is_built() -> None:
    """A fresh install (README command 2) builds the C pass; only MILP_PARTITION_NO_C=1 says it may be missing."""
    if os.environ.get("MILP_PARTITION_NO_C") == "1":
        pytest.skip("MILP_PARTITION_NO_C=1")
    assert native.available(), "milp_partition.joint._jointdp did not build (is a C compiler installed?)"


@needs_c
def test_c_knapsack_matches_enumeration() -> None:
    rng = np.random.default_rng(11)
    for _ in range(400):
        n, o = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        cost = rng.integers(1, 6, (n, o)).astype(float)
        mem = rng.integers(1, 6, (n, o)).astype(float)
        if rng.random() < 0.3:  # a missing option
            cost[0, o - 1] = mem[0, o - 1] = math.inf
        cap = float(rng.integers(n, 5 * n))
        best = math.inf
        for pick in itertools.product(range(o), repeat=n):
            if sum(mem[v, pick[v]] for v in range(n)) <= cap:
                best = min(best, sum(cost[v, pick[v]] for v in range(n)))
        got = native._ext.knapsack(n, o, np.ascontiguousarray(cost), np.ascontiguousarray(mem), cap)
        assert got == pytest.approx(best) if math.isfinite(best) else math.isinf(got)


@needs_c
def test_least_cost_is_the_exact_knapsacks_value() -> None:
    """native.least_cost (the polisher's stage value): min_cost_exact's value, any layout of the arrays, no rows."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n, o = int(rng.integers(1, 12)), int(rng.integers(1, 4))
        cost, mem = rng.random((n, o)), rng.random((n, o))
        cap = float(rng.uniform(0.2, 0.6) * n)
        want = min_cost_exact(cost, mem, cap)[0]
        got = native.least_cost(cost.T.copy().T, mem, cap)  # a Fortran-ordered copy is made contiguous
        assert got == pytest.approx(want, rel=1e-12) if math.isfinite(want) else got == math.inf
    assert native.least_cost(np.zeros((0, 2)), np.zeros((0, 2)), 1.0) == 0.0


@needs_c
def test_c_knapsack_matches_numpy_on_forty_nodes() -> None:
    """Forty distinct nodes (the frontier with its LP pruning at work): the C and numpy exact knapsacks agree."""
    rng = np.random.default_rng(5)
    for _ in range(80):
        n, o = 40, int(rng.integers(2, 4))
        cost = rng.random((n, o)) * 10
        mem = rng.integers(0, 30, (n, o)).astype(float)
        cap = float(mem.min(axis=1).sum() + rng.integers(0, 200))
        expected = min_cost_exact(cost, mem, cap)[0]
        got = native._ext.knapsack(n, o, np.ascontiguousarray(cost), np.ascontiguousarray(mem), cap)
        assert got == pytest.approx(expected, rel=1e-12)


def _problems() -> list:
    out = [random_problem(seed) for seed in range(0, 400, 7)]
    out += [repeated_chain(seed, n=6) for seed in range(4)] + [repeated_diamonds(seed) for seed in range(4)]
    return out


@needs_c
@pytest.mark.parametrize("index", range(len(_problems())))
def test_c_search_matches_numpy_search_and_brute_force(index: int) -> None:
    problem = _problems()[index]
    data = joint_data(problem)
    assert native.applies(data)
    fast, slow = search(data, native=True), search(data, native=False)
    assert fast.infeasible == slow.infeasible
    if slow.infeasible:
        return
    assert fast.optimal and slow.optimal
    assert fast.value == pytest.approx(slow.value, rel=1e-9, abs=1e-12)
    # the C pass's bound: proven (never above the optimum), a few roundings below it at most
    assert fast.bound <= slow.value
    assert fast.bound >= slow.value * (1 - 1e-11)
    if len(problem.nodes) <= 4:
        assert fast.value == pytest.approx(brute_force(problem), rel=1e-9, abs=1e-12)


def _bert(devices: int, memory_gib: float):  # type: ignore[no-untyped-def]
    return read_joint(
        SHARED / "bert32a100.json", devices=devices, memory_bytes=int(memory_gib * GIB), bandwidth_bytes_per_s=25 * GIB
    )


@needs_c
@pytest.mark.parametrize("devices,memory_gib", [(8, 8), (32, 2), (128, 1)])
def test_c_pass_agrees_with_the_numpy_pass_target_by_target(devices: int, memory_gib: float) -> None:
    """Both passes at the same targets, below, at and above the optimum: the same answer, the C bound valid."""
    data = joint_data(_bert(devices, memory_gib))
    fast, slow = native.NativeJointDP(data), JointDP(data)
    # the optimum, proven by the numpy pass alone: the search's value (found by the C pass, seconds faster than a
    # numpy search) is a plan's value for the numpy pass, and its strict pass there finds nothing better -- the
    # certificate a numpy search ends with
    optimum = search(data).value
    plan, _ = slow.feasible(optimum)
    assert plan is not None and plan[1] <= optimum
    assert slow.feasible(optimum, strict=True)[0] is None
    for factor in (0.9, 0.99, 0.9999, 1.0001, 1.01, 1.2):
        target = optimum * factor
        (got_c, next_c), (got_np, _) = fast.feasible(target), slow.feasible(target)
        assert (got_c is None) == (got_np is None), factor
        if got_c is None:
            assert target < next_c <= optimum  # a proven bound above the target, never above the optimum
        else:
            assert got_c[1] <= target * (1 + 1e-12)
    # strict at the optimum: nothing better exists; the bound it proves is the optimum less a few roundings
    got, proven = fast.feasible(optimum, strict=True)
    assert got is None and optimum * (1 - 1e-11) <= fast.proven_strict(optimum, proven) <= optimum


@needs_c
def test_solve_reports_the_c_pass_and_skips_the_piper_style_warm_start() -> None:
    result = solve_joint(_bert(8, 8), JointSolveSettings(time_limit_s=600.0))
    assert result.status == "optimal"
    assert result.solver_notes["dp_pass"] == "c"
    assert "piper-style" not in [h.name for h in result.heuristics]
    assert result.objective == pytest.approx(0.16585575, rel=1e-9)  # Piper's value (shared/benchmarks/README.md)


@needs_c
def test_pair_count_matches_subset_pairs_and_caps() -> None:
    """count_pairs counts (ideal, proper sub-ideal) pairs as brute force does, and says -1 past its cap."""
    from milp_partition.joint.generators import parallel_branches

    data = joint_data(parallel_branches(3, 3, 4, 2 * GIB, seed=1))
    sets = [frozenset(int(v) for v in np.nonzero(row)[0]) for row in data.member]
    want = sum(1 for a in sets for b in sets if b < a)
    words = np.ascontiguousarray(data.ideal_words, dtype=np.uint64)
    assert native._ext.count_pairs(words, len(sets), words.shape[1], 10**9) == want
    assert native._ext.count_pairs(words, len(sets), words.shape[1], want - 1) == -1
    assert native.pair_count(data) == want and data.pairs == want


@needs_c
def test_c_pass_runs_where_pairs_are_few_though_ideals_are_many() -> None:
    """4 branches of 10: 14,643 ideals (L^2 / 2 past 100M) but 19M pairs: the search would run in C (its proof takes ~20 s)."""
    from milp_partition.joint.generators import parallel_branches

    data = joint_data(parallel_branches(4, 10, 8, 2 * GIB, seed=0), max_ideals=20_000)
    assert len(data.ideals) * (len(data.ideals) - 1) // 2 > native.MAX_PAIRS
    assert native.applies(data)
    assert 0 < native.pair_count(data) * len(data.degrees) <= native.MAX_PAIRS


def test_many_ideals_run_the_order_dp_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ORDER_DP_FROM_IDEALS the chain runs the DP along topological orders before the exact passes."""
    from milp_partition.joint import solve as joint_solve
    from milp_partition.joint.generators import parallel_branches

    problem = parallel_branches(3, 3, 4, 2 * GIB, seed=1)
    names = lambda r: [h.name for h in r.heuristics]  # noqa: E731
    assert "order-dp" not in names(solve_joint(problem, JointSolveSettings(time_limit_s=60)))
    monkeypatch.setattr(joint_solve, "ORDER_DP_FROM_IDEALS", 10)
    result = solve_joint(problem, JointSolveSettings(time_limit_s=60))
    assert "order-dp" in names(result) and result.status.value == "optimal"


def test_too_many_ideals_for_the_compiled_passes_take_the_wide_route(monkeypatch: pytest.MonkeyPatch) -> None:
    # below the ideal cap but past what the C passes take, the numpy passes would run for minutes (five branches of
    # eight: 16% from the optimum after 60 s); the solve takes the route of graphs past the cap instead, and its
    # bound stays below the optimum the DP proves
    from milp_partition.joint.generators import parallel_branches

    if not native.available():
        pytest.skip("the extension is not built")
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=1)  # 127 ideals
    settings = JointSolveSettings(
        time_limit_s=60.0, solver="none", schedule=JointSchedule().capped(orders=1.0, orders_below_cap=1.0, polish=1.0)
    )
    exact = solve_joint(problem, settings)
    assert exact.status.value == "optimal" and "too_many_ideals" not in exact.solver_notes
    monkeypatch.setattr(native, "MAX_IDEALS", 100)
    assert native.too_large(joint_data(problem))
    wide = solve_joint(problem, settings)
    assert "compiled passes" in wide.solver_notes["too_many_ideals"]
    assert wide.solver in ("joint-wide", "joint-milp/cpsat")
    assert wide.objective is not None and wide.objective >= exact.objective * (1 - 1e-9)
    assert wide.bound is not None and wide.bound <= exact.objective * (1 + 1e-9)
    # a forced number of stages, or no extension: the DP runs as before (the numpy passes)
    monkeypatch.setattr(native, "_ext", None)
    assert not native.too_large(joint_data(problem))
    assert "too_many_ideals" not in solve_joint(problem, settings).solver_notes
