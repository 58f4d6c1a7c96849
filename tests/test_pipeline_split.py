"""The balanced split (the pipeline heuristic for graphs the DPs cannot take) and the pipeline's one time budget."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from milp_partition.heuristics.pipeline_dp import chain_dp
from milp_partition.heuristics.pipeline_split import balanced_split

from milp_partition.cluster import homogeneous_cluster
from milp_partition.pipeline.generators import InceptionLikeSettings, inception_like
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings, PipelineSolution
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
from milp_partition.verifiers.pipeline import verify_pipeline
from tests.brute_force import brute_force_pipeline
from tests.conftest import random_pipeline_problem


def test_split_is_feasible_and_scored_right_and_never_beats_the_optimum() -> None:
    """On random graphs (memory binding or not, backward nodes, 1F1B): a split the verifier accepts, at its value,
    never below the brute-force optimum; or a stated reason."""
    found = 0
    for seed in range(30):
        problem = random_pipeline_problem(
            seed,
            max_nodes=7,
            binding_memory=seed % 3 == 0,
            backward=seed % 2 == 1,
            memory_model="1f1b" if seed % 4 == 3 else "static",
        )
        res = balanced_split(problem)
        if res.solution is None:
            assert any(w in res.message for w in ("memory", "overfills", "accelerator")), res.message
            continue
        found += 1
        report = verify_pipeline(problem, res.solution)
        assert report.feasible, (seed, report.violations)
        assert math.isclose(report.objective, res.value, rel_tol=1e-9, abs_tol=1e-12)
        assert report.objective >= brute_force_pipeline(problem) - 1e-9
    assert found >= 20  # it answers on most of them


def test_chain_graph_split_matches_the_chain_dp_without_transfers() -> None:
    """On a chain with free transfers and no memory limit, an interval split is what the chain DP finds too."""
    graph = inception_like(3, InceptionLikeSettings(blocks=12, branches=1, max_depth=1))
    graph = replace(graph, edges=tuple(replace(e, transfer_time=0.0) for e in graph.edges))
    problem = PipelineProblem(graph, homogeneous_cluster(3, None), PipelineSettings())
    split, dp = balanced_split(problem), chain_dp(problem)
    assert split.solution is not None and dp.solution is not None
    assert split.value == pytest.approx(dp.value, rel=1e-9)


def test_a_graph_too_large_for_the_dps_gets_the_split_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past DP_MAX_UNITS the DPs refuse at once (no quadratic tables); the split answers, verified.  The cap is lowered
    here so that a small graph stands for a large one (benchmarks/pipeline_scaling.py runs 100,000 nodes)."""
    from milp_partition.heuristics import pipeline_dp

    monkeypatch.setattr(pipeline_dp, "DP_MAX_UNITS", 40)
    graph = inception_like(1, InceptionLikeSettings(blocks=60))
    assert len(graph.nodes) > 4 * 40
    problem = PipelineProblem(graph, homogeneous_cluster(4, None), PipelineSettings())
    result = solve_pipeline(problem, SolveSettings(solver="none", time_limit_s=600))
    runs = {h.name: h for h in result.heuristics}
    assert runs["chain_dp"].objective is None and "not run" in runs["chain_dp"].message
    assert runs["ideal_dp"].objective is None and "not run" in runs["ideal_dp"].message
    assert result.status == "feasible" and result.objective == runs["balanced_split"].objective
    assert verify_pipeline(problem, PipelineSolution(result.assignment)).feasible


def test_dp_stops_at_its_deadline() -> None:
    """A deadline already past: the DP stops with no solution and says so (the clock is not raced)."""
    problem = random_pipeline_problem(5, max_nodes=8)
    res = chain_dp(problem, deadline=0.0)
    assert res.solution is None and "stopped by the time limit" in res.message
