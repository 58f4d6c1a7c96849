"""1F1B on tiny training graphs (forward nodes, their backward nodes, gradient edges) against brute force.

Issue 20 item 6: the stage order of a 1F1B pipeline (forward edges to the same or later stages, backward edges
to the same or earlier ones, edges between a forward and a backward node unordered) must be the same rule in the
verifier, the CP-SAT/CBC model and the DPs.  Every assignment of every node is scored by the independent verifier
(``brute_force.py``); CP-SAT and CBC must prove its optimum, and the DPs may never report less.
"""

from __future__ import annotations

import math
import random

import pytest
from brute_force import brute_force_pipeline
from milp_partition.heuristics.pipeline_dp import chain_dp, ideal_dp

from milp_partition.cluster import Device, make_cluster
from milp_partition.graph import Edge, Node, make_graph
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings, PipelineSolution
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
from milp_partition.verifiers.pipeline import verify_pipeline


def training_problem(seed: int, *, tied: bool = True, binding_memory: bool = True) -> PipelineProblem:
    """2-3 forward nodes (a path, sometimes with a skip edge), a backward node each (``v:bwd``, in ``v``'s colocation
    group when ``tied``), edges ``v -> v:bwd`` and ``v:bwd -> u:bwd`` per forward edge ``u -> v``, as the importer
    builds them; 2-3 accelerators under 1F1B, memory binding or not."""
    rng = random.Random(seed)
    n, k = rng.choice([2, 3]), rng.choice([2, 3])
    fwd = [f"f{i}" for i in range(n)]
    pairs = [(i, i + 1) for i in range(n - 1)] + ([(0, 2)] if n == 3 and rng.random() < 0.5 else [])
    nodes = [
        Node(
            id=v,
            forward_time=round(rng.uniform(0.5, 4.0), 3),
            param_bytes=rng.randint(0, 40),
            activation_bytes=rng.randint(1, 40),
            other_bytes=rng.randint(0, 60),
            colocation_group=v if tied else None,
        )
        for v in fwd
    ]
    nodes += [
        Node(id=v + ":bwd", backward_time=round(rng.uniform(0.5, 8.0), 3), is_backward=True, colocation_group=v if tied else None)
        for v in fwd
    ]
    cost = {v: round(rng.uniform(0.0, 1.0), 3) for v in fwd}
    edges = [Edge(fwd[i], fwd[j], transfer_time=cost[fwd[i]]) for i, j in pairs]
    edges += [Edge(v, v + ":bwd", transfer_time=0.0 if tied else cost[v]) for v in fwd]
    edges += [Edge(fwd[j] + ":bwd", fwd[i] + ":bwd", transfer_time=cost[fwd[j]]) for i, j in pairs]
    graph = make_graph(nodes, edges, time_unit="ms")
    need = sum(nd.param_bytes + k * nd.activation_bytes + nd.other_bytes for nd in nodes)
    memory = max(1, int(need / k * rng.uniform(0.8, 1.3))) if binding_memory else None
    cluster = make_cluster([Device(f"gpu{d}", "gpu", memory) for d in range(k)])
    return PipelineProblem(graph, cluster, PipelineSettings(memory_model="1f1b"))


def _check_solver(problem: PipelineProblem, solver: str, expected: float) -> None:
    result = solve_pipeline(problem, SolveSettings(solver=solver, time_limit_s=30, threads=1))
    if math.isinf(expected):
        assert result.status == "infeasible", result.message
        return
    assert result.status == "optimal", result.message
    assert result.objective == pytest.approx(expected, rel=1e-6, abs=1e-9), solver
    report = verify_pipeline(problem, PipelineSolution(result.assignment))
    assert report.feasible and report.objective == pytest.approx(result.objective, rel=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_tied_training_graphs_match_brute_force(seed: int) -> None:
    problem = training_problem(seed, binding_memory=seed % 3 != 0)
    expected = brute_force_pipeline(problem)
    for solver in ("cpsat", "cbc"):
        _check_solver(problem, solver, expected)
    for result in (ideal_dp(problem), chain_dp(problem)):  # a chain of tied pairs: every 1F1B split is a chain
        assert result.exact, result.message
        if math.isinf(expected):
            assert result.solution is None, result.message
        else:
            assert result.value == pytest.approx(expected, rel=1e-9, abs=1e-9), result.message
            assert verify_pipeline(problem, result.solution).objective == pytest.approx(result.value, rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_free_backward_nodes_match_brute_force(seed: int) -> None:
    """Backward nodes not tied to their forward nodes (``--free-backward``): the gradient edge still runs back."""
    problem = training_problem(100 + seed, tied=False, binding_memory=seed % 2 == 0)
    expected = brute_force_pipeline(problem)
    for solver in ("cpsat", "cbc"):
        _check_solver(problem, solver, expected)
    for result in (ideal_dp(problem), chain_dp(problem)):  # backward nodes are placed greedily: never below
        if result.solution is not None:
            assert result.value >= expected - 1e-9
            assert verify_pipeline(problem, result.solution).objective == pytest.approx(result.value, rel=1e-12)


def test_a_training_pipeline_splits_over_every_stage() -> None:
    """The bug of issue 20 item 6: with gradient edges ordered like activations, no split was allowed at all."""
    problem = training_problem(3, binding_memory=False)
    expected = brute_force_pipeline(problem)
    one_device = sum(nd.total_time for nd in problem.graph.nodes)
    assert expected < one_device
    result = solve_pipeline(problem, SolveSettings(solver="cpsat", time_limit_s=30, threads=1))
    assert len(set(result.assignment.values())) > 1 and result.objective == pytest.approx(expected)
