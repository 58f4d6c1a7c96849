"""Strategy DPs and reductions against a brute force written here and against PaSE's reference optima."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milp_partition.strategy.dp import StrategyDPSettings, chain_dp, pase_dp
from milp_partition.strategy.problem import StrategyEdge, StrategyNode, StrategyProblem, StrategySolution, strategy_cluster
from milp_partition.strategy.reductions import Reduced, drop_dominated, fold_leaves, merge_chains, reduce
from milp_partition.verifiers.strategy import verify_strategy

STRATEGY = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "strategy"
BENCHMARKS = [
    "alexnet_p4.json",
    "alexnet_p8.json",
    "alexnet_p32.json",
    "rnnlm_p8.json",
    "rnnlm_p32.json",
    "resnet101_p4.json",
    "resnet101_p8.json",
    "inception3_p4.json",
    "inception3_p8.json",
    "transformer_p4.json",
    "transformer_p8.json",
]


# --------------------------------------------------------------------------- instances and the oracle


def random_problem(
    seed: int,
    *,
    memory: bool = False,
    chain: bool = False,
    odd_edges: bool = False,
    small_ints: bool = True,
) -> StrategyProblem:
    """3-7 layers of 1-4 configurations, random DAG edges (a directed path with ``chain``).

    ``small_ints`` draws costs from 0..5 so that ties and dominance are common;
    ``odd_edges`` adds a parallel edge, a reversed edge or a self-loop now and then.
    """
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 8))
    sizes = [int(rng.integers(1, 5)) for _ in range(n)]

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        if small_ints:
            return rng.integers(0, 6, size=shape).astype(np.float64)
        return rng.uniform(0.0, 10.0, size=shape)

    pairs = [(i, i + 1) for i in range(n - 1)] if chain else [(i, j) for j in range(n) for i in range(j) if rng.random() < 0.45]
    if odd_edges and pairs:
        extra = rng.integers(0, 3)
        i, j = pairs[int(rng.integers(0, len(pairs)))]
        pairs.append([(i, j), (j, i), (i, i)][extra])
    nodes = tuple(
        StrategyNode(
            id=f"L{v}",
            name=f"layer {v}",
            configs=tuple(f"c{v}_{c}" for c in range(sizes[v])),
            cost=draw((sizes[v],)),
            memory_bytes=rng.integers(1, 10, size=sizes[v]).astype(np.float64) if memory else None,
        )
        for v in range(n)
    )
    edges = tuple(StrategyEdge(f"L{i}", f"L{j}", draw((sizes[i], sizes[j]))) for i, j in pairs)
    limit = None
    if memory:
        low = sum(float(nd.memory_bytes.min()) for nd in nodes)  # type: ignore[union-attr]
        high = sum(float(nd.memory_bytes.max()) for nd in nodes)  # type: ignore[union-attr]
        limit = int(rng.uniform(low - 2, high))
    return StrategyProblem(nodes, edges, name=f"random-{seed}", cluster=strategy_cluster(1, limit))


def brute_force(problem: StrategyProblem) -> tuple[float, StrategySolution | None]:
    """Enumerate every assignment (vectorized), cost it by the definition; ``(inf, None)`` when none fits."""
    index = problem.index
    sizes = [len(nd.configs) for nd in problem.nodes]
    if not sizes:
        return 0.0, StrategySolution({})
    grid = np.stack(np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij"), axis=-1).reshape(-1, len(sizes))
    total = np.zeros(grid.shape[0])
    for v, nd in enumerate(problem.nodes):
        total += np.asarray(nd.cost)[grid[:, v]]
    for e in problem.edges:
        total += np.asarray(e.cost)[grid[:, index[e.source]], grid[:, index[e.target]]]
    if problem.memory_limit_bytes is not None:
        used = sum(np.asarray(nd.memory_bytes)[grid[:, v]] for v, nd in enumerate(problem.nodes))
        total[used > problem.memory_limit_bytes] = math.inf
    best = int(np.argmin(total))
    if not math.isfinite(total[best]):
        return math.inf, None
    picks = grid[best]
    return float(total[best]), StrategySolution({nd.id: nd.configs[picks[v]] for v, nd in enumerate(problem.nodes)})


def unconstrained(problem: StrategyProblem) -> StrategyProblem:
    return StrategyProblem(problem.nodes, problem.edges, name=problem.name)


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


# --------------------------------------------------------------------------- (a) DPs against brute force


@pytest.mark.parametrize("seed", range(60))
def test_pase_dp_matches_brute_force(seed: int) -> None:
    problem = random_problem(seed, small_ints=seed % 2 == 0, odd_edges=seed % 3 == 0)
    best, _ = brute_force(problem)
    result = pase_dp(problem)
    assert result.exact and result.solution is not None, result.message
    assert close(result.value, best), (result.value, best, result.message)
    report = verify_strategy(problem, result.solution)
    assert report.feasible and close(report.objective, result.value)


@pytest.mark.parametrize("seed", range(30))
def test_pase_dp_under_memory_limit_is_a_heuristic(seed: int) -> None:
    problem = random_problem(1000 + seed, memory=True)
    result = pase_dp(problem)
    assert not result.exact and result.solution is not None
    assert close(result.value, brute_force(unconstrained(problem))[0])  # it ignores memory
    fits = verify_strategy(problem, result.solution).feasible
    assert ("within the limit" in result.message) == fits, result.message
    assert ("OVER the limit" in result.message) == (not fits), result.message


@pytest.mark.parametrize("seed", range(30))
def test_chain_dp_matches_brute_force_on_chains(seed: int) -> None:
    problem = random_problem(2000 + seed, chain=True, small_ints=seed % 2 == 0)
    result = chain_dp(problem)
    assert result.exact and result.solution is not None, result.message
    assert close(result.value, brute_force(problem)[0])
    assert close(verify_strategy(problem, result.solution).objective, result.value)
    with_memory = chain_dp(random_problem(2000 + seed, chain=True, memory=True, small_ints=seed % 2 == 0))
    assert with_memory.solution is not None and not with_memory.exact


def test_chain_dp_refuses_other_graphs() -> None:
    nodes = tuple(StrategyNode(f"L{v}", "", ("a", "b"), np.array([1.0, 2.0])) for v in range(4))

    def edges(*pairs: tuple[int, int]) -> tuple[StrategyEdge, ...]:
        return tuple(StrategyEdge(f"L{i}", f"L{j}", np.ones((2, 2))) for i, j in pairs)

    assert chain_dp(StrategyProblem(nodes, edges((0, 1), (1, 2), (2, 3)))).solution is not None
    for pairs in (
        [(0, 1), (1, 2), (2, 3), (0, 2)],  # a fork
        [(1, 0), (1, 2), (2, 3)],  # two out-edges
        [(0, 1), (2, 3)],  # two pieces
        [(0, 1), (1, 2), (2, 0)],  # a cycle and a loose layer
        [(0, 1), (1, 1), (1, 2)],  # a self-loop
    ):
        result = chain_dp(StrategyProblem(nodes, edges(*pairs)))
        assert result.solution is None and "not a chain" in result.message, pairs


def test_pase_dp_refuses_above_the_cap() -> None:
    problem = random_problem(11)
    while not problem.edges or all(len(nd.configs) == 1 for nd in problem.nodes):
        problem = random_problem(int(problem.name.split("-")[1]) + 1)
    result = pase_dp(problem, StrategyDPSettings(max_table_entries=1))
    assert result.solution is None and not result.exact and math.isinf(result.value)
    assert "exceeds max_table_entries=1" in result.message and "use the exact model" in result.message


# --------------------------------------------------------------------------- (b) reductions keep the optimum


def _check_reduction(problem: StrategyProblem, reduced: Reduced) -> None:
    best, _ = brute_force(problem)
    best_reduced, solution = brute_force(reduced.problem)
    if math.isinf(best):
        assert math.isinf(best_reduced)
        return
    assert solution is not None and close(best_reduced, best), (best_reduced, best, reduced.summary())
    lifted = reduced.lift(solution)
    report = verify_strategy(problem, lifted)
    assert report.feasible, report.violations
    assert close(report.objective, verify_strategy(reduced.problem, solution).objective)
    assert close(report.objective, best)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), memory=st.booleans(), odd=st.booleans(), ints=st.booleans())
def test_reduce_keeps_the_optimum(seed: int, memory: bool, odd: bool, ints: bool) -> None:
    problem = random_problem(seed, memory=memory, odd_edges=odd, small_ints=ints)
    reduced = reduce(problem)
    if memory:
        assert reduced.nodes_merged == 0 and reduced.leaves_folded == 0
    _check_reduction(problem, reduced)


@pytest.mark.parametrize("step", [drop_dominated, merge_chains, fold_leaves])
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), memory=st.booleans())
def test_each_reduction_keeps_the_optimum(step: Callable[[StrategyProblem], Reduced], seed: int, memory: bool) -> None:
    problem = random_problem(seed, memory=memory, odd_edges=seed % 2 == 0)
    _check_reduction(problem, step(problem))


def test_merge_chains_on_a_chain_leaves_the_ends() -> None:
    problem = random_problem(5, chain=True)
    reduced = merge_chains(problem)
    assert [nd.id for nd in reduced.problem.nodes] == [problem.nodes[0].id, problem.nodes[-1].id]
    assert reduced.nodes_merged == len(problem.nodes) - 2
    _check_reduction(problem, reduced)


# --------------------------------------------------------------------------- (c) PaSE's benchmark tables


def load_strategy_tables(path: Path) -> StrategyProblem:
    """Parse a ``strategy-tables/1`` file (local reader, independent of :mod:`milp_partition.io`)."""
    data = json.loads(path.read_text())
    nodes = tuple(
        StrategyNode(nd["id"], nd["name"], tuple(nd["configs"]), np.asarray(nd["cost"], dtype=np.float64)) for nd in data["nodes"]
    )
    edges = tuple(StrategyEdge(e["source"], e["target"], np.asarray(e["cost"], dtype=np.float64)) for e in data["edges"])
    return StrategyProblem(
        nodes, edges, name=data["name"], cost_unit=data["cost_unit"], cluster=strategy_cluster(int(data["devices"]))
    )


@pytest.fixture(scope="module")
def optima() -> dict[str, float]:
    path = STRATEGY / "optima.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: the tests need ../shared beside the repo")
    return {row["file"]: float(row["optimum"]) for row in json.loads(path.read_text())}


@pytest.mark.parametrize("name", BENCHMARKS)
def test_pase_dp_reaches_pase_optimum(name: str, optima: dict[str, float]) -> None:
    problem = load_strategy_tables(STRATEGY / name)
    result = pase_dp(problem)
    assert result.solution is not None, result.message
    assert result.exact
    assert close(result.value, optima[name]), (result.value, optima[name])
    assert close(verify_strategy(problem, result.solution).objective, optima[name])

    reduced = reduce(problem)
    on_reduced = pase_dp(reduced.problem)
    assert on_reduced.solution is not None, on_reduced.message
    lifted = reduced.lift(on_reduced.solution)
    report = verify_strategy(problem, lifted)
    assert report.feasible and close(report.objective, optima[name]) and close(on_reduced.value, optima[name])

    if chain_dp(problem).solution is not None:
        assert close(chain_dp(problem).value, optima[name])
