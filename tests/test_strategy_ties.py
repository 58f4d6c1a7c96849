"""Tying identical repeated blocks: detection, the quotient problem (brute force), honest reporting."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_strategy_dp import brute_force

from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem, StrategySolution, strategy_cluster
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy
from milp_partition.strategy.ties import TieSettings, find_ties, quotient
from milp_partition.verifiers.strategy import verify_strategy


def _stack(blocks: int, seed: int, memory: bool = False) -> StrategyProblem:
    """blocks x (a -> b) in a chain, every block with the same random tables; in -> ... -> out around them."""
    rng = np.random.default_rng(seed)
    k = 3
    a_cost, b_cost = rng.integers(0, 9, k).astype(float), rng.integers(0, 9, k).astype(float)
    ab, ba = rng.integers(0, 9, (k, k)).astype(float), rng.integers(0, 9, (k, k)).astype(float)
    mem_a, mem_b = rng.integers(1, 9, k), rng.integers(1, 9, k)
    nodes = [
        StrategyNode(
            "in", "in", ("i0", "i1", "i2"), rng.integers(0, 9, k).astype(float), rng.integers(1, 9, k) if memory else None
        )
    ]
    edges = []
    prev = "in"
    for t in range(blocks):
        nodes.append(StrategyNode(f"a{t}", "A", ("c0", "c1", "c2"), a_cost, mem_a if memory else None))
        nodes.append(StrategyNode(f"b{t}", "B", ("c0", "c1", "c2"), b_cost, mem_b if memory else None))
        edges.append(StrategyEdge(prev, f"a{t}", ba if prev != "in" else rng.integers(0, 9, (k, k)).astype(float)))
        edges.append(StrategyEdge(f"a{t}", f"b{t}", ab))
        prev = f"b{t}"
    nodes.append(
        StrategyNode(
            "out", "out", ("o0", "o1", "o2"), rng.integers(0, 9, k).astype(float), rng.integers(1, 9, k) if memory else None
        )
    )
    edges.append(StrategyEdge(prev, "out", rng.integers(0, 9, (k, k)).astype(float)))
    limit = None
    if memory:
        low = sum(int(n.memory_bytes.min()) for n in nodes)
        high = sum(int(n.memory_bytes.max()) for n in nodes)
        limit = (low + high) // 2
    return StrategyProblem(tuple(nodes), tuple(edges), name=f"stack{seed}", cluster=strategy_cluster(1, limit))


def test_find_ties_groups_the_inner_copies() -> None:
    problem = _stack(5, 0)
    groups = {tuple(problem.nodes[v].id for v in g) for g in find_ties(problem, TieSettings(rounds=1))}
    # one round: every a (each has an a-b edge and a b-a edge, except a0 fed by 'in') and every b but the last
    assert ("a1", "a2", "a3", "a4") in groups and ("b0", "b1", "b2", "b3") in groups
    deeper = {tuple(problem.nodes[v].id for v in g) for g in find_ties(problem, TieSettings(rounds=3))}
    assert ("a2",) not in deeper and all(len(g) >= 2 for g in deeper)


def _brute_force_tied(problem: StrategyProblem, ties) -> float:
    rep = {v: g[0] for g in ties for v in g}
    free = [v for v in range(len(problem.nodes)) if rep.get(v, v) == v]
    best = math.inf
    for picks in itertools.product(*[range(len(problem.nodes[v].configs)) for v in free]):
        chosen = dict(zip(free, picks))
        choice = {n.id: n.configs[chosen[rep.get(v, v)]] for v, n in enumerate(problem.nodes)}
        report = verify_strategy(problem, StrategySolution(choice))
        if report.feasible:
            best = min(best, report.objective)
    return best


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("memory", [False, True])
def test_quotient_optimum_is_the_best_tied_solution(seed: int, memory: bool) -> None:
    problem = _stack(3, seed, memory)
    ties = find_ties(problem, TieSettings(rounds=1))
    q = quotient(problem, ties)
    expected = _brute_force_tied(problem, ties)
    got, solution = brute_force(q.problem)
    assert got == pytest.approx(expected, rel=1e-12) if math.isfinite(expected) else math.isinf(got)
    if solution is not None:  # the lifted solution costs, on the original, what it costs on the quotient
        assert verify_strategy(problem, q.lift(solution)).objective == pytest.approx(got, rel=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_tied_solve_reports_honestly(seed: int) -> None:
    problem = _stack(3, 50 + seed, memory=seed % 2 == 1)
    exact, _ = brute_force(problem)
    res = solve_strategy(problem, StrategySolveSettings(threads=1, time_limit_s=20, tie_blocks=True, tie_rounds=1))
    if math.isinf(exact):
        assert res.objective is None
        return
    assert res.objective is not None and res.objective >= exact - 1e-9
    assert verify_strategy(problem, StrategySolution(res.assignment)).feasible
    if res.bound is not None:
        assert res.bound <= exact + 1e-9  # the bound is the untied problem's, never the tied one's
    if res.status == "optimal":
        assert res.objective == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_tied_solve_alone_returns_the_best_tied_solution(seed: int) -> None:
    """Without the DPs (no untied incumbent, no bound) the answer is the tied optimum and never called optimal."""
    problem = _stack(3, 80 + seed, memory=seed % 2 == 1)
    ties = find_ties(problem, TieSettings(rounds=1))
    expected = _brute_force_tied(problem, ties)
    res = solve_strategy(
        problem, StrategySolveSettings(threads=1, time_limit_s=20, tie_blocks=True, tie_rounds=1, heuristics=False, reduce=False)
    )
    if math.isinf(expected):
        assert res.objective is None
        return
    assert res.status == "feasible" and res.bound is None
    assert res.objective == pytest.approx(expected, rel=1e-9)
    assert res.solver_notes["ties"]["tied_status"] == "optimal"


def test_the_tied_problem_runs_under_the_whole_solve_s_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tied problem's chain shares the outer run's budget (its deadline), not a fresh limit of what was left."""
    import milp_partition.strategy.solve as solve_module

    original = solve_module.solve_strategy
    inner: list[StrategySolveSettings] = []

    def recording(problem, settings):  # type: ignore[no-untyped-def]
        inner.append(settings)
        return original(problem, settings)

    monkeypatch.setattr(solve_module, "solve_strategy", recording)
    settings = StrategySolveSettings(threads=1, time_limit_s=20, tie_blocks=True, tie_rounds=1, heuristics=False, reduce=False)
    original(_stack(3, 80, memory=False), settings)
    assert len(inner) == 1 and not inner[0].tie_blocks
    assert inner[0].budget is not None and inner[0].budget.limit_s == 20  # the whole limit, from the outer start
