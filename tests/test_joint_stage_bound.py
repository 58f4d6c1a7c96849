"""The stage bound (milp_partition/joint/stage_bound.py) is a proven lower bound: checked against brute force and the
exact DP on small wide graphs, its certificates re-evaluated at an optimal plan, and it beats the segment bound."""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from joint_past_the_cap import solved_past_the_ideal_cap
from milp_partition.formulations.joint import work_lower_bound_s
from test_joint_bruteforce import brute_force, random_problem
from test_joint_io import GIB

from milp_partition.budget import Budget
from milp_partition.joint.dp import joint_data, search
from milp_partition.joint.generators import parallel_branches
from milp_partition.joint.problem import JointPlan, JointProblem, JointShape
from milp_partition.joint.segment_bound import segment_bound
from milp_partition.joint.stage_bound import (
    _column_generation,
    _price,
    _Sequence,
    certify,
    chain_data,
    sequences,
    stage_bound,
    stage_bound_report,
)


def _optimum(problem: JointProblem) -> tuple[float, JointPlan | None]:
    found = search(joint_data(problem), budget=Budget.starting_now(300.0))
    assert not found.timed_out
    return (math.inf, None) if found.infeasible else (found.value, found.plan)


def _bound(problem: JointProblem, upper: float = math.inf, branching: bool = False) -> float:
    """The bound from the work bound; without branching the column generation converges well within the budget."""
    budget = Budget.starting_now(120.0)
    return stage_bound_report(problem, work_lower_bound_s(problem), upper, budget, branching=branching).bound


#: (branches, depth, devices, memory in GiB, seed, shape) of a parallel_branches problem
_Wide = tuple[int, int, int, float, int, "JointShape | None"]


@functools.cache
def _wide(key: _Wide) -> tuple[JointProblem, float, JointPlan | None]:
    """A small wide graph and its DP optimum; built once, shared by the tests that use the same graph."""
    branches, depth, devices, memory_gib, seed, shape = key
    problem = replace(parallel_branches(branches, depth, devices, memory_gib * GIB, seed=seed), shape=shape)
    best, plan = _optimum(problem)
    return problem, best, plan


@functools.cache
def _wide_bound(key: _Wide, upper: float, branching: bool = False) -> float:
    """``_bound`` of ``_wide(key)``'s problem: one run per (graph, upper end, branching), shared by the tests."""
    return _bound(_wide(key)[0], upper, branching)


@pytest.mark.parametrize("seed", range(80))
def test_bound_is_below_the_brute_force_optimum(seed: int) -> None:
    problem = random_problem(seed)
    best = brute_force(problem)
    bound = _bound(problem, branching=True)
    if math.isinf(best):
        return  # no plan: any bound is right
    assert bound <= best * (1 + 1e-9)
    assert _bound(problem, best, branching=True) <= best * (1 + 1e-9)


WIDE = [
    (3, 4, 4, 2.0, 0, None),
    (3, 4, 4, 1.0, 1, None),
    (3, 3, 4, 0.5, 2, None),
    (3, 4, 8, 2.0, 1, None),
    (2, 5, 8, 0.75, 3, None),
    (4, 3, 4, 1.0, 5, JointShape(tensor_parallel=1)),
    (4, 3, 4, 1.0, 5, JointShape(tensor_parallel=2)),
    (3, 3, 8, 1.0, 4, JointShape(stages=2)),
    (3, 4, 8, 1.0, 6, JointShape(data_parallel=2)),
]


@pytest.mark.parametrize(("branches", "depth", "devices", "memory_gib", "seed", "shape"), WIDE)
def test_bound_is_below_the_dp_optimum_on_small_wide_graphs(
    branches: int, depth: int, devices: int, memory_gib: float, seed: int, shape: JointShape | None
) -> None:
    key = (branches, depth, devices, memory_gib, seed, shape)
    problem, best, _ = _wide(key)
    if math.isinf(best):
        assert math.isinf(_bound(problem))  # the DP proves no plan; so does this bound here
        return
    for upper in (best, best * 1.5, math.inf) if devices <= 4 else (best,):  # k = 8: 480 sequences, one run
        assert work_lower_bound_s(problem) <= _wide_bound(key, upper) <= best * (1 + 1e-9)
    if devices <= 4:  # branching too (at k = 8 it may take the whole budget)
        assert _wide_bound(key, best, branching=True) <= best * (1 + 1e-9)


def test_branching_proves_an_optimum() -> None:
    # three branches of four on 4 devices: the relaxation alone is 2.7% short; branching on nodes' stages closes it
    key = (3, 4, 4, 2.0, 0, None)  # WIDE's first graph: its bounds at the optimum are computed once for both tests
    _, best, _ = _wide(key)
    assert _wide_bound(key, best) < best * 0.99
    assert best * (1 - 1e-6) <= _wide_bound(key, best, branching=True) <= best * (1 + 1e-9)


def test_it_beats_the_segment_and_work_bounds() -> None:
    # three branches of four on 8 devices (480 stage sequences): stage identity and whole runs count
    key = (3, 4, 8, 2.0, 1, None)  # one of WIDE's graphs: its stage bound at the optimum is computed once for both
    problem, best, _ = _wide(key)
    work = work_lower_bound_s(problem)
    segment = segment_bound(problem, work, best, Budget.starting_now(120.0))
    stage = _wide_bound(key, best)
    assert stage <= best * (1 + 1e-9)
    assert stage > segment * 1.01 and stage > work * 1.05


def test_a_forced_shape_limits_the_sequences() -> None:
    problem = replace(parallel_branches(2, 2, 8, GIB, seed=0), shape=JointShape(stages=2, data_parallel=2))
    found = sequences(problem)
    assert found is not None and found and all(len(s) == 2 and all(d == 2 for d, _ in s) for s in found)
    assert set(found) == {((2, t1), (2, t2)) for t1 in (1, 2) for t2 in (1, 2)}
    free = sequences(replace(problem, shape=None))
    assert free is not None and len(free) > len(found)


def _plan_vectors(sq: _Sequence, problem: JointProblem, plan: JointPlan) -> tuple[np.ndarray, np.ndarray]:
    """The plan's own assignment in the relaxation: per chain its time and memory vectors (units of the reference)."""
    cd = chain_data(problem)
    index = {nd.id: v for v, nd in enumerate(problem.nodes)}
    stage_of, option_of = {}, {}
    for g, st in enumerate(plan.stages):
        for v in st.nodes:
            stage_of[index[v]] = g
            ids = [c.id for c in problem.nodes[index[v]].configs[st.tensor_parallel]]
            option_of[index[v]] = ids.index(st.configs[v])
    H = cd.node.shape[0]
    time = np.zeros((H, sq.m))
    mem = np.zeros((H, sq.m))
    for h in range(H):
        nodes = [int(v) for v in cd.node[h] if v >= 0]
        for pos, v in enumerate(nodes):
            g, o = stage_of[v], option_of[v]
            time[h, g] += sq.tau[v, g, o] + sq.out_first[v, g] + sq.out_last[v, g]
            time[h, 0] += sq.out_first[v, g]
            time[h, sq.m - 1] += sq.out_last[v, g]
            mem[h, g] += sq.mem[v, g, o]
            if pos + 1 < len(nodes) and stage_of[nodes[pos + 1]] > g:
                e = cd.edge[h, pos] / sq.ref
                time[h, g] += e
                time[h, stage_of[nodes[pos + 1]]] += e
    return time, mem


@pytest.mark.parametrize(("branches", "depth", "devices", "memory_gib", "seed"), [(3, 4, 4, 1.0, 1), (3, 4, 8, 2.0, 1)])
def test_certificates_hold_at_an_optimal_plan(branches: int, depth: int, devices: int, memory_gib: float, seed: int) -> None:
    # weak duality, checked term by term: the optimal plan's own assignment is one the DP minimises over, so the
    # DP's least value is at most the plan's, and the certified bound of the plan's sequence is at most its value
    problem = parallel_branches(branches, depth, devices, memory_gib * GIB, seed=seed)
    best, plan = _optimum(problem)
    assert plan is not None
    seq = tuple((st.data_parallel, st.tensor_parallel) for st in plan.stages)
    sq = _Sequence(problem, chain_data(problem), seq, best)
    target = 1.0 + 1e-9
    got, _ = _column_generation(sq, target, Budget.starting_now(60.0))
    assert got <= target
    sq.set_target(target)
    lam, mu = sq.lam, sq.mu
    assert certify(sq, lam, mu) <= 1.0 + 1e-9
    value, _, _, _, _ = _price(sq, lam, mu)
    time, mem = _plan_vectors(sq, problem, plan)
    own = (lam[None, :] * time + mu[None, :] * mem).sum(axis=1)
    assert np.all(value <= own * (1 + 1e-9) + 1e-12)
    # the plan satisfies (c) and (d): its stages' time at most d T, memory at most M
    assert np.all(time.sum(axis=0) <= sq.d * target * (1 + 1e-9))
    assert np.all(mem.sum(axis=0) <= 1 + 1e-9)
    for trial in range(5):  # any multipliers at all: never above the optimum
        rng = np.random.default_rng(trial)
        assert certify(sq, rng.random(sq.m), rng.random(sq.m) * 0.1) <= target


def test_pricing_is_exact_on_a_small_chain() -> None:
    # the DP's least value against every monotone assignment of one chain (stages and configurations enumerated)
    problem = parallel_branches(2, 3, 4, 2 * GIB, seed=7)
    cd = chain_data(problem)
    seq = ((1, 1), (1, 2), (1, 1))
    sq = _Sequence(problem, cd, seq, 0.01)
    sq.set_target(math.inf)
    rng = np.random.default_rng(0)
    lam, mu = rng.random(3), rng.random(3) * 0.1
    value, _, _, _, _ = _price(sq, lam, mu)
    h = next(h for h in range(cd.node.shape[0]) if (cd.node[h] >= 0).sum() == 3)
    nodes = [int(v) for v in cd.node[h]]
    best = math.inf
    for stages in itertools.product(range(3), repeat=3):
        if list(stages) != sorted(stages):
            continue
        total = 0.0
        for pos, (v, g) in enumerate(zip(nodes, stages)):
            total += min(lam[g] * sq.tau[v, g, o] + mu[g] * sq.mem[v, g, o] for o in range(sq.tau.shape[2]))
            total += sq.out_first[v, g] * (lam[0] + lam[g]) + sq.out_last[v, g] * (lam[2] + lam[g])
            if pos + 1 < 3 and stages[pos + 1] > g:
                total += cd.edge[h, pos] / sq.ref * (lam[g] + lam[stages[pos + 1]])
        best = min(best, total)
    assert value[h] == pytest.approx(best, rel=1e-12)


def test_no_plan_at_any_target() -> None:
    # 0.2 GiB per device: no stage holds a node's fixed bytes; the DP and the bound both say so
    problem = parallel_branches(3, 4, 4, 0.2 * GIB, seed=0)
    assert search(joint_data(problem), budget=Budget.starting_now(60.0)).infeasible
    report = stage_bound_report(problem, 0.0, math.inf, Budget.starting_now(60.0))
    assert math.isinf(report.bound) and report.converged


def test_a_spent_budget_still_gives_a_bound() -> None:
    # no column generation at all: the pooled work bounds of the sequences (or the lower end)
    problem = parallel_branches(3, 4, 8, 2 * GIB, seed=1)
    best, _ = _optimum(problem)
    assert 1e-4 <= stage_bound(problem, 1e-4, 1.0, Budget.starting_now(0.0)) <= best
    assert 1e-4 <= stage_bound(problem, 1e-4, best, Budget.starting_now(0.5)) <= best * (1 + 1e-9)


def test_the_chain_adds_the_stage_bound_past_the_ideal_cap() -> None:
    problem, result = solved_past_the_ideal_cap()  # the solve the order DP and segment bound tests check too
    best, _ = _optimum(problem)
    assert "too_many_ideals" in result.solver_notes
    assert any(run.name == "stage-bound" for run in result.heuristics)
    assert result.solver_notes["stage_bound"] <= best * (1 + 1e-9)
    assert result.bound is not None and result.bound <= best * (1 + 1e-9)
