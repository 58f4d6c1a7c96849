"""Min-marginals, min-marginal fixing and the Pareto DP against brute force on tiny instances."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from milp_partition.heuristics.strategy_lagrangian import lagrangian_memory_bound
from milp_partition.heuristics.strategy_marginals import fix_by_marginals, marginal_masks, min_marginals, restrict
from test_strategy_dp import brute_force, random_problem

from milp_partition.chain import PROOF_REL_TOL
from milp_partition.strategy.dp import pase_dp
from milp_partition.strategy.pareto_dp import ParetoDPSettings, memory_search, pareto_dp
from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem, StrategySolution
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy
from milp_partition.verifiers.strategy import verify_strategy


def _all_costs(problem: StrategyProblem, lam: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every assignment (rows), its cost plus lam * memory, and its memory."""
    index = problem.index
    sizes = [len(n.configs) for n in problem.nodes]
    grid = np.stack(np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij"), axis=-1).reshape(-1, len(sizes))
    total = np.zeros(grid.shape[0])
    used = np.zeros(grid.shape[0])
    for v, n in enumerate(problem.nodes):
        total += np.asarray(n.cost)[grid[:, v]]
        if n.memory_bytes is not None:
            used += np.asarray(n.memory_bytes)[grid[:, v]]
    for e in problem.edges:
        total += np.asarray(e.cost)[grid[:, index[e.source]], grid[:, index[e.target]]]
    return grid, total + lam * used, used


def _limited(seed: int) -> StrategyProblem:
    """A random tiny problem whose memory limit lies between the least and the largest memory."""
    problem = random_problem(seed, memory=True, odd_edges=seed % 3 == 0, small_ints=seed % 2 == 0)
    _, _, used = _all_costs(problem)
    rng = np.random.default_rng(seed)
    limit = int(used.min() + rng.random() * (used.max() - used.min()))
    return problem.with_memory_limit(limit)


@pytest.mark.parametrize("seed", range(40))
def test_min_marginals_match_brute_force(seed: int) -> None:
    problem = random_problem(seed, memory=True, odd_edges=seed % 2 == 0, small_ints=seed % 3 == 0)
    lam = [0.0, 0.37, 2.5][seed % 3]
    grid, total, _ = _all_costs(problem, lam)
    mm = min_marginals(problem, lam)
    assert mm.optimum == pytest.approx(total.min(), rel=1e-12, abs=1e-9)
    for v in range(len(problem.nodes)):
        expected = [total[grid[:, v] == j].min() for j in range(len(problem.nodes[v].configs))]
        np.testing.assert_allclose(mm.values[v], expected, rtol=1e-12, atol=1e-9)


def test_min_marginals_of_disconnected_parts() -> None:
    """Two components: each marginal adds the other component's optimum."""
    a = StrategyNode("a", "", ("x", "y"), np.array([1.0, 4.0]), np.array([1.0, 1.0]))
    b = StrategyNode("b", "", ("x", "y"), np.array([2.0, 0.0]), np.array([1.0, 1.0]))
    c = StrategyNode("c", "", ("x", "y", "z"), np.array([5.0, 3.0, 9.0]), np.array([1.0, 1.0, 1.0]))
    problem = StrategyProblem((a, b, c), (StrategyEdge("a", "b", np.array([[0.0, 7.0], [1.0, 0.0]])),))
    grid, total, _ = _all_costs(problem)
    mm = min_marginals(problem)
    for v in range(3):
        expected = [total[grid[:, v] == j].min() for j in range(len(problem.nodes[v].configs))]
        np.testing.assert_allclose(mm.values[v], expected)


def _mid_size(seed: int, layers: int = 24) -> StrategyProblem:
    """A random layered graph (residual-like: edges to the next and, sometimes, the one after)."""
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(2, 7)) for _ in range(layers)]
    nodes = tuple(
        StrategyNode(f"L{v}", "", tuple(f"c{j}" for j in range(k)), rng.uniform(0, 50, k), rng.integers(1, 40, k).astype(float))
        for v, k in enumerate(sizes)
    )
    edges = []
    for v in range(layers - 1):
        edges.append(StrategyEdge(f"L{v}", f"L{v + 1}", rng.uniform(0, 30, (sizes[v], sizes[v + 1]))))
        if v + 2 < layers and rng.random() < 0.3:
            edges.append(StrategyEdge(f"L{v}", f"L{v + 2}", rng.uniform(0, 30, (sizes[v], sizes[v + 2]))))
    return StrategyProblem(nodes, tuple(edges))


def test_min_marginals_match_clamped_dp_on_a_mid_size_instance() -> None:
    """mu(v, j) equals the PaSE DP's optimum with v clamped to j."""
    problem = _mid_size(7)
    lam = 0.8
    shifted = replace(problem, nodes=tuple(replace(n, cost=n.cost + lam * n.memory_bytes) for n in problem.nodes))
    mm = min_marginals(problem, lam)
    for v in range(0, len(problem.nodes), 3):
        for j in range(len(problem.nodes[v].configs)):
            keep = {problem.nodes[v].id: np.arange(len(problem.nodes[v].configs)) == j}
            clamped = pase_dp(restrict(shifted, keep))
            assert mm.values[v][j] == pytest.approx(clamped.value, rel=1e-12)


@pytest.mark.parametrize("seed", range(120))
def test_fixing_keeps_the_optimum(seed: int) -> None:
    """Fixing at a feasible solution's cost (the optimum's, or a worse one) never changes the optimum."""
    problem = _limited(seed)
    optimum, best = brute_force(problem)
    if best is None:
        return
    grid, total, used = _all_costs(problem)
    feasible = np.flatnonzero(used <= problem.memory_limit_bytes)
    rng = np.random.default_rng(seed)
    row = int(feasible[rng.integers(0, feasible.size)]) if seed % 2 else int(feasible[np.argmin(total[feasible])])
    upper = float(total[row])
    incumbent = StrategySolution({n.id: n.configs[grid[row, v]] for v, n in enumerate(problem.nodes)})
    lams = [0.0, float(rng.uniform(0, 3)), float(rng.uniform(0, 0.5))]
    keep, _ = marginal_masks(problem, upper, lams, incumbent)
    fixed = restrict(problem, keep)
    assert brute_force(fixed)[0] == pytest.approx(optimum, rel=1e-12, abs=1e-12)
    assert verify_strategy(fixed, incumbent).feasible  # the incumbent itself survives
    result = fix_by_marginals(problem, upper, incumbent)
    assert brute_force(result.problem)[0] == pytest.approx(optimum, rel=1e-12, abs=1e-12)
    assert result.bound <= optimum + 1e-9 * max(1.0, abs(optimum))


def test_fixing_removes_something_at_the_optimum() -> None:
    """At the optimum's own cost, fixing is not idle on a mid-size instance."""
    problem = _mid_size(3)
    grid_free = pase_dp(problem)
    limited = problem.with_memory_limit(int(verify_strategy(problem, grid_free.solution).memory_bytes * 0.97))
    lag = lagrangian_memory_bound(limited)
    keep, _ = marginal_masks(limited, lag.value, [lam for lam, _ in sorted(lag.evaluated, key=lambda t: -t[1])[:4]], lag.solution)
    assert restrict(limited, keep).total_configs < limited.total_configs


@pytest.mark.parametrize("seed", range(80))
def test_pareto_dp_matches_brute_force(seed: int) -> None:
    problem = _limited(1000 + seed)
    optimum, _ = brute_force(problem)
    lams = [0.0, 0.6, 3.0][: 1 + seed % 3]
    dp = ParetoDPSettings(chunk_labels=[1, 3, 1_000_000][seed % 3])  # small chunks split every join
    for target in (optimum, optimum * 1.2 + 1, 1e12):
        if math.isinf(optimum):
            result = pareto_dp(problem, 1e12, lams, dp)
            assert result.solution is None and result.proven_above
            break
        result = pareto_dp(problem, target, lams, dp)
        assert result.finished and result.optimal, result.message
        assert result.value == pytest.approx(optimum, rel=1e-12, abs=1e-12)
        assert verify_strategy(problem, result.solution).feasible
    if math.isfinite(optimum) and optimum > 0.5:
        below = pareto_dp(problem, optimum - 0.5 if seed % 2 == 0 else optimum * 0.9, lams, dp)
        assert not below.optimal and below.proven_above


@pytest.mark.parametrize("seed", range(30))
def test_memory_search_and_solve_chain_match_brute_force(seed: int) -> None:
    problem = _limited(2000 + seed)
    optimum, _ = brute_force(problem)
    lag = lagrangian_memory_bound(problem)
    if math.isfinite(lag.bound):
        search = memory_search(problem, lag.bound, [lam for lam, _ in sorted(lag.evaluated, key=lambda t: -t[1])])
        assert search.optimal and search.value == pytest.approx(optimum, rel=1e-12, abs=1e-12), search.message
    result = solve_strategy(problem, StrategySolveSettings(solver="none" if seed % 2 else "cpsat", threads=1, time_limit_s=20))
    if math.isinf(optimum):
        assert result.status in ("infeasible", "unknown")
    else:
        assert result.status == "optimal", result.message
        assert result.objective == pytest.approx(optimum, rel=1e-9, abs=1e-9)
        assert result.gap is not None and result.gap <= PROOF_REL_TOL


def test_non_static_memory_models_are_left_alone() -> None:
    problem = replace(_limited(5), memory_model="liveness")
    assert not pareto_dp(problem, 1e12, [1.0]).finished
    _, steps = marginal_masks(problem, 1e12, [1.0, 2.0])
    assert [s.multiplier for s in steps] == [0.0]  # plain min-marginals only
    assert fix_by_marginals(problem, 1e12).problem is problem


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "optimum"),
    [("resnet101_p4.json", 6369525863744.0), ("transformer_p4.json", 8730383155200.0), ("transformer_p8.json", 6083018170368.0)],
)
def test_binding_memory_limit_proven_on_real_instances(name: str, optimum: float) -> None:
    """The benchmark's binding limit (halfway between the least memory and the unconstrained optimum's): proven in seconds."""
    import json

    from test_strategy_dp import STRATEGY

    from milp_partition.io.strategy_tables import read_strategy_tables
    from milp_partition.strategy.memory import with_memory

    row = {r["file"]: r for r in json.loads((STRATEGY / "optima.json").read_text())}[name]
    free = with_memory(read_strategy_tables(STRATEGY / name))
    need = verify_strategy(free, StrategySolution(row["pase_choice"])).memory_bytes
    least = sum(int(n.memory_bytes.min()) for n in free.nodes)
    problem = free.with_memory_limit((least + int(need)) // 2)
    # seconds here; the limit only guards against a hang (the memory search gets half of it, ~35x what it needs)
    result = solve_strategy(problem, StrategySolveSettings(threads=2, time_limit_s=300))
    assert result.status == "optimal" and result.gap is not None and result.gap <= PROOF_REL_TOL, result.message
    assert result.objective == pytest.approx(optimum, rel=1e-12)
    # what makes these fast, in place of a clock: the exact memory search (Lagrangian bound, marginal fixing, Pareto
    # DP) proves the optimum itself, on fewer configurations than the reductions left, and the back-end never runs
    search = result.solver_notes["memory_search"]
    assert search["optimal"] and "pareto_dp" in result.message, (search, result.message)
    assert search["configurations_after_fixing"] < result.solver_notes["reduction"]["configurations"]
    assert result.solver_seconds == 0.0
