"""The liveness memory model of the strategy problem: verifier by hand, exact models against brute force."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from test_strategy_dp import random_problem

from milp_partition.io.strategy_tables import read_strategy_tables, write_strategy_tables
from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem, StrategySolution, strategy_cluster
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy
from milp_partition.verifiers.strategy import verify_strategy


def _node(name: str, cost: list[float], memory: list[int], activation: list[int]) -> StrategyNode:
    return StrategyNode(
        name,
        name,
        tuple(f"{name}{c}" for c in range(len(cost))),
        np.asarray(cost, dtype=float),
        np.asarray(memory, dtype=np.int64),
        np.asarray(activation, dtype=np.int64),
    )


def _chain(limit: int | None, model: str = "liveness") -> StrategyProblem:
    """A -> B -> C, one configuration each: resident 1, 2, 3; activations 10, 20, 30."""
    nodes = (_node("A", [1], [11], [10]), _node("B", [1], [22], [20]), _node("C", [1], [33], [30]))
    edges = (StrategyEdge("A", "B", np.zeros((1, 1))), StrategyEdge("B", "C", np.zeros((1, 1))))
    return StrategyProblem(nodes, edges, memory_model=model, cluster=strategy_cluster(1, limit))


def test_verifier_live_peak_by_hand() -> None:
    # resident 6 always; step A: 10 live; step B: A(10)+B(20); step C: B(20)+C(30) -> peak 56 (static sum: 66)
    choice = StrategySolution({"A": "A0", "B": "B0", "C": "C0"})
    assert verify_strategy(_chain(None), choice).memory_bytes == 56
    assert verify_strategy(_chain(None, "static"), choice).memory_bytes == 66
    assert verify_strategy(_chain(56), choice).feasible
    report = verify_strategy(_chain(55), choice)
    assert not report.feasible and "at layer 'C'" in report.violations[0]


def _schedule(problem: StrategyProblem) -> list[int]:
    index = problem.index
    preds = {v: {index[e.source] for e in problem.edges if index[e.target] == v} for v in range(len(problem.nodes))}
    order: list[int] = []
    while len(order) < len(problem.nodes):
        order.append(min(v for v in preds if v not in order and preds[v] <= set(order)))
    return order


def _brute_force_liveness(problem: StrategyProblem) -> float:
    """Enumerate every assignment; live memory stepped through the schedule, written a third way."""
    best = math.inf
    for cost, peak in _all_assignments(problem):
        if peak <= problem.memory_limit_bytes:
            best = min(best, cost)
    return best


def _all_assignments(problem: StrategyProblem) -> list[tuple[float, float]]:
    """(cost, live peak) of every assignment."""
    index = problem.index
    order = _schedule(problem)
    step = {v: t for t, v in enumerate(order)}
    last = {v: step[v] for v in step}
    for e in problem.edges:
        last[index[e.source]] = max(last[index[e.source]], step[index[e.target]])
    rows = []
    for picks in itertools.product(*[range(len(n.configs)) for n in problem.nodes]):
        mem = [float(n.memory_bytes[c]) for n, c in zip(problem.nodes, picks)]
        act = [float(n.activation_bytes[c]) for n, c in zip(problem.nodes, picks)]
        resident = sum(m - a for m, a in zip(mem, act))
        peak = max(resident + sum(act[v] for v in step if step[v] <= t <= last[v]) for t in range(len(order)))
        cost = sum(float(n.cost[c]) for n, c in zip(problem.nodes, picks))
        cost += sum(float(e.cost[picks[index[e.source]], picks[index[e.target]]]) for e in problem.edges)
        rows.append((cost, peak))
    return rows


def _liveness_problem(seed: int) -> StrategyProblem:
    base = random_problem(seed, memory=True, small_ints=seed % 2 == 0)
    rng = np.random.default_rng(seed)
    nodes = tuple(
        replace(
            n, memory_bytes=np.asarray(n.memory_bytes, dtype=np.int64) + 5, activation_bytes=rng.integers(0, 6, len(n.configs))
        )
        for n in base.nodes
    )
    problem = replace(base, nodes=nodes, memory_model="liveness").with_memory_limit(None)
    rows = _all_assignments(problem)
    least_peak = min(peak for _, peak in rows)
    optimum_peak = min(rows)[1]  # the peak of a cheapest assignment
    # mostly a limit that binds (between the least peak and the unconstrained optimum's), now and then one below everything
    limit = int(least_peak) - 1 if seed % 7 == 3 else int(rng.integers(int(least_peak), int(optimum_peak) + 1))
    return problem.with_memory_limit(limit)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("solver", ["cpsat", "cbc"])
def test_liveness_optimum_matches_brute_force(seed: int, solver: str) -> None:
    problem = _liveness_problem(seed)
    expected = _brute_force_liveness(problem)
    result = solve_strategy(problem, StrategySolveSettings(solver=solver, threads=1, time_limit_s=30))
    if math.isinf(expected):
        assert result.status == "infeasible", result.message
        return
    assert result.status == "optimal", result.message
    assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert verify_strategy(problem, StrategySolution(result.assignment)).feasible


@pytest.mark.parametrize("seed", range(6))
def test_liveness_never_costs_more_than_static(seed: int) -> None:
    problem = _liveness_problem(100 + seed)
    live = solve_strategy(problem, StrategySolveSettings(threads=1, time_limit_s=30))
    static = solve_strategy(replace(problem, memory_model="static"), StrategySolveSettings(threads=1, time_limit_s=30))
    if static.status == "optimal":
        assert live.status == "optimal" and live.objective <= static.objective + 1e-9


def test_liveness_round_trips_through_the_tables_format(tmp_path) -> None:
    problem = _liveness_problem(3)
    path = tmp_path / "live.json"
    write_strategy_tables(problem, path)
    back = read_strategy_tables(path)
    assert back.memory_model == "liveness"
    for a, b in zip(problem.nodes, back.nodes):
        assert np.array_equal(a.activation_bytes, b.activation_bytes)


def test_activation_larger_than_memory_is_refused(tmp_path) -> None:
    from milp_partition.errors import InputError

    path = tmp_path / "bad.json"
    path.write_text(
        '{"format": "strategy-tables/1", "devices": 2, "nodes": [{"id": "a", "configs": ["x"], "cost": [1],'
        ' "memory_bytes": [5], "activation_bytes": [6]}], "edges": []}'
    )
    with pytest.raises(InputError, match=r"node 'a'.*activation_bytes.*larger than memory_bytes"):
        read_strategy_tables(path)
