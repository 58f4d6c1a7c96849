"""The exact pipeline models against brute force, and CP-SAT against CBC, on random tiny graphs."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from brute_force import brute_force_pipeline
from conftest import random_pipeline_problem

from milp_partition.backends.registry import installed
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
from milp_partition.verifiers.pipeline import verify_pipeline

#: HiGHS (the ``highs`` extra) replays the CBC cases where it is installed.
needs_highs = pytest.mark.skipif(not installed("highs"), reason="highspy is not installed (pip install 'milp-partition[highs]')")

CASES = [
    dict(seed=s, contiguous=c, binding_memory=m, backward=b)
    for s, (c, m, b) in enumerate([(c, m, b) for c in (True, False) for m in (False, True) for b in (False, True)] * 2)
]


def _check(problem, solver: str, warm: bool = False) -> None:
    expected = brute_force_pipeline(problem)
    result = solve_pipeline(problem, SolveSettings(solver=solver, heuristics=warm, warm_start=warm, time_limit_s=30, threads=1))
    if math.isinf(expected):
        assert result.status == "infeasible", result.message
        return
    assert result.status == "optimal", result.message
    assert result.objective == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert result.bound is not None and result.bound <= result.objective + 1e-9
    report = verify_pipeline(problem, _solution(result))
    assert report.feasible and report.objective == pytest.approx(result.objective, rel=1e-12)


def _solution(result):
    from milp_partition.pipeline.problem import PipelineSolution

    return PipelineSolution(result.assignment)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_cpsat_matches_brute_force(case) -> None:
    _check(random_pipeline_problem(**case, max_nodes=8 if case["seed"] % 2 else 7), "cpsat")


@pytest.mark.parametrize("case", CASES[:8], ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_cbc_matches_brute_force(case) -> None:
    _check(random_pipeline_problem(**case, max_nodes=6), "cbc")


@needs_highs
@pytest.mark.parametrize("case", CASES[:8], ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_highs_matches_brute_force(case) -> None:
    _check(random_pipeline_problem(**case, max_nodes=6), "highs")


@pytest.mark.parametrize("seed", range(4))
def test_cpu_cores_and_warm_start(seed: int) -> None:
    problem = random_pipeline_problem(100 + seed, max_nodes=6, devices=2, cpu_cores=1, binding_memory=seed % 2 == 0)
    _check(problem, "cpsat", warm=True)


@pytest.mark.parametrize("seed", range(3))
def test_1f1b_memory_model(seed: int) -> None:
    problem = random_pipeline_problem(200 + seed, max_nodes=6, devices=3, binding_memory=True, memory_model="1f1b")
    problem = replace(problem, settings=replace(problem.settings, optimizer_state_factor=2.0))
    _check(problem, "cpsat")


@pytest.mark.parametrize("seed", range(3))
def test_memory_objective(seed: int) -> None:
    base = random_pipeline_problem(300 + seed, max_nodes=6, devices=3)
    fastest = solve_pipeline(base, SolveSettings(heuristics=False, threads=1))
    assert fastest.status == "optimal"
    bound = fastest.objective * 1.2
    problem = replace(base, settings=replace(base.settings, objective="memory", max_time_per_sample=bound))
    _check(problem, "cpsat")


def test_infeasible_memory_is_an_answer() -> None:
    problem = random_pipeline_problem(7, max_nodes=5, devices=2, binding_memory=True)
    tiny = replace(
        problem, cluster=replace(problem.cluster, devices=tuple(replace(d, memory_bytes=1) for d in problem.cluster.devices))
    )
    for solver in ("cpsat", "cbc"):
        result = solve_pipeline(tiny, SolveSettings(solver=solver, threads=1))
        assert result.status == "infeasible"
        assert result.objective is None and not result.assignment


@pytest.mark.parametrize("seed", range(6))
def test_cpsat_cbc_and_ideal_dp_agree(seed: int) -> None:
    """CP-SAT and CBC reach one optimum; the ideal DP is never below it, and equals it on a path."""
    from milp_partition.heuristics.pipeline_dp import ideal_dp

    problem = random_pipeline_problem(400 + seed, max_nodes=8, contiguous=True, binding_memory=seed % 2 == 1)
    values = {}
    for solver in ("cpsat", "cbc"):
        result = solve_pipeline(problem, SolveSettings(solver=solver, heuristics=False, threads=1, time_limit_s=30))
        assert result.status in ("optimal", "infeasible")
        values[solver] = result.objective
    if values["cpsat"] is None:
        assert values["cbc"] is None
        return
    assert values["cpsat"] == pytest.approx(values["cbc"], rel=1e-6)
    dp = ideal_dp(problem)
    if dp.solution is not None:
        assert dp.value >= values["cpsat"] * (1 - 1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_ideal_dp_is_exact_on_paths(seed: int) -> None:
    """On a path every contiguous split is a chain of ideals, so the DP's value is the optimum."""
    from milp_partition.heuristics.pipeline_dp import ideal_dp

    base = random_pipeline_problem(500 + seed, max_nodes=8)
    ids = [n.id for n in base.graph.nodes]
    from milp_partition.graph import Edge, make_graph

    path = make_graph(
        [replace(n, colocation_group=None, is_backward=False) for n in base.graph.nodes],
        [Edge(a, b, transfer_time=0.3 * (i + 1)) for i, (a, b) in enumerate(itertools.pairwise(ids))],
    )
    problem = replace(base, graph=path)
    exact = solve_pipeline(problem, SolveSettings(heuristics=False, threads=1))
    dp = ideal_dp(problem)
    assert exact.status == "optimal" and dp.exact
    assert dp.value == pytest.approx(exact.objective, rel=1e-9)
    assert brute_force_pipeline(problem) == pytest.approx(exact.objective, rel=1e-9)
