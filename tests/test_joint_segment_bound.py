"""The segment bound (milp_partition/joint/segment_bound.py) is a proven lower bound: checked against brute force,
the exact DP on small wide graphs, and the proven optima of the shared instances."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from joint_past_the_cap import solved_past_the_ideal_cap
from milp_partition.formulations.joint import work_lower_bound_s
from test_joint_bruteforce import brute_force, random_problem
from test_joint_io import GIB, JOINT, needs_shared

from milp_partition.budget import Budget
from milp_partition.io.piper import read_joint
from milp_partition.joint.generators import parallel_branches
from milp_partition.joint.problem import JointProblem, JointShape, JointSolveSettings
from milp_partition.joint.segment_bound import chains, relaxation_feasible, segment_bound
from milp_partition.joint.solve import solve_joint


def _bound(problem: JointProblem, upper: float = math.inf, seconds: float = 120.0) -> float:
    return segment_bound(problem, work_lower_bound_s(problem), upper, Budget.starting_now(seconds))


def _dp_optimum(problem: JointProblem) -> float:
    result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
    assert result.status == "optimal", result.message
    assert result.objective is not None
    return result.objective


def test_chains_of_parallel_branches() -> None:
    problem = parallel_branches(3, 4, 4, GIB, seed=1)
    found = {tuple(problem.nodes[v].id for v in nodes): inner for nodes, inner in chains(problem)}
    assert set(found) == {("source",), ("sink",), *((f"b{b}.0", f"b{b}.1", f"b{b}.2", f"b{b}.3") for b in range(3))}
    by_edge = {(e.source, e.target): e.bytes for e in problem.edges}
    for ids, inner in found.items():
        assert inner == [by_edge[u, v] for u, v in itertools.pairwise(ids)]


@pytest.mark.parametrize("seed", range(80))
def test_relaxation_is_feasible_at_the_brute_force_optimum(seed: int) -> None:
    problem = random_problem(seed)
    best = brute_force(problem)
    if math.isinf(best):
        return
    # the optimal plan is a point of the relaxation: "infeasible" there would be a wrong proof
    assert relaxation_feasible(problem, best * (1 + 1e-9), 60.0) is True
    assert _bound(problem) <= best * (1 + 1e-9)


@pytest.mark.parametrize(
    ("branches", "depth", "devices", "memory_gib", "seed"),
    [(3, 4, 4, 1.0, 1), (4, 3, 8, 1.0, 0), (3, 3, 4, 0.5, 2), (2, 5, 8, 0.75, 3)],
)
def test_bound_is_below_the_dp_optimum_on_small_wide_graphs(
    branches: int, depth: int, devices: int, memory_gib: float, seed: int
) -> None:
    problem = parallel_branches(branches, depth, devices, memory_gib * GIB, seed=seed)
    best = _dp_optimum(problem)
    assert relaxation_feasible(problem, best * (1 + 1e-9), 60.0) is True
    bound = _bound(problem, best * 1.5)
    assert work_lower_bound_s(problem) <= bound <= best * (1 + 1e-9)


def test_bound_is_below_the_optimum_of_a_forced_shape() -> None:
    problem = replace(parallel_branches(3, 3, 8, GIB, seed=4), shape=JointShape(stages=2))
    best = _dp_optimum(problem)
    assert relaxation_feasible(problem, best * (1 + 1e-9), 60.0) is True
    assert _bound(problem) <= best * (1 + 1e-9)


def test_memory_tight_wide_graph_beats_the_work_bound() -> None:
    # 1 GiB on four branches of six, 4 devices: the work bound ignores memory; the relaxation does not (1.27 times
    # the work bound; 1.03 times with memory free, so the 1.05 below needs the memory)
    problem = parallel_branches(4, 6, 4, 1.0 * GIB, seed=0)
    assert _bound(problem, 0.05) > 1.05 * work_lower_bound_s(problem)


@needs_shared
@pytest.mark.parametrize(
    ("name", "k", "memory_gib", "optimum"),
    [("bert32a100.json", 8, 8, 0.16585575), ("gnmt.json", 2, 2.5, 263.354289), ("resnet.json", 8, 8, 63.4335366)],
)
def test_bound_is_below_the_shared_optima(name: str, k: int, memory_gib: float, optimum: float) -> None:
    # optima proven by the DP (results/joint.md; Piper's values where they agree)
    problem = read_joint(JOINT / name, devices=k, memory_bytes=memory_gib * GIB, bandwidth_bytes_per_s=25 * GIB)
    # the relaxation is feasible at the optimum (so no bisection can prove more); a few seconds of bisection (each
    # of these LPs takes seconds: the bound proven by then) stay below it too
    assert relaxation_feasible(problem, optimum * (1 + 1e-7), 60.0) is True
    assert _bound(problem, optimum * 1.2, seconds=4.0) <= optimum * (1 + 1e-7)


def test_the_chain_adds_the_segment_bound_past_the_ideal_cap() -> None:
    problem, result = solved_past_the_ideal_cap()  # the solve the order DP and stage bound tests check too
    best = _dp_optimum(problem)
    assert "too_many_ideals" in result.solver_notes
    assert any(run.name == "segment-bound" for run in result.heuristics)
    assert work_lower_bound_s(problem) <= result.solver_notes["segment_bound"] <= best * (1 + 1e-9)
    assert result.bound is not None and result.bound <= best * (1 + 1e-9)


def test_a_program_past_the_size_cap_leaves_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from milp_partition.joint import segment_bound as module

    problem = parallel_branches(6, 8, 8, 1.5 * GIB, seed=0)
    assert module.model_size(problem) == (6 * 36 + 2) * len(module.stage_classes(problem))
    monkeypatch.setattr(module, "MAX_SEGMENT_VARIABLES", module.model_size(problem) - 1)
    assert _bound(problem, 0.05) == work_lower_bound_s(problem)


def test_without_a_plan_the_doubling_stops() -> None:
    # 1 MiB per device: no plan at all; the relaxation stays infeasible, the bound climbs a bounded number of times
    from milp_partition.joint.segment_bound import MAX_DOUBLINGS

    problem = parallel_branches(2, 2, 2, 2**20, seed=0)
    lower = work_lower_bound_s(problem)
    assert relaxation_feasible(problem, lower * 2**MAX_DOUBLINGS, 60.0) is False
    assert _bound(problem) <= lower * 2**MAX_DOUBLINGS
