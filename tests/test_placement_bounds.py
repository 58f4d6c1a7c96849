"""Lower bounds of the placement problem against brute force on tiny random instances."""

from __future__ import annotations

import math

import numpy as np
import pytest

from milp_partition.placement.bounds import best_bound, device_path, fractional_load, transfer_flow
from milp_partition.placement.problem import make_placement_problem
from tests.placement_brute_force import brute_force_makespan


def _problem(seed: int, n: int, d: int, *, comm_scale: float = 1.0, binding_memory: bool = False):
    rng = np.random.default_rng(seed)
    time = rng.integers(1, 10, size=(n, d)).astype(float)
    time[rng.random((n, d)) < 0.15] = np.inf
    for i in range(n):
        if not np.isfinite(time[i]).any():
            time[i, rng.integers(d)] = rng.integers(1, 10)
    if n > 3 and seed % 2:
        time[0] = 0.0  # a virtual input
    edges = [(f"t{i}", f"t{j}") for i in range(n) for j in range(i + 1, n) if rng.random() < 0.45]
    comm = (rng.integers(0, 8, size=(len(edges), d, d)) * comm_scale).astype(float)
    for e in range(len(edges)):
        np.fill_diagonal(comm[e], 0.0)
    memory = rng.integers(1, 5, size=n).astype(float)
    capacity = np.full(d, memory.sum() if not binding_memory else math.ceil(memory.sum() / d) + 1)
    capacity = np.maximum(capacity, memory.max())
    return make_placement_problem([f"t{i}" for i in range(n)], [f"d{k}" for k in range(d)], time, memory, capacity, edges, comm)


CASES = [
    (seed, n, d, scale, mem)
    for seed, (n, d, scale, mem) in enumerate(
        [
            (4, 2, 1.0, False),
            (5, 2, 3.0, False),
            (5, 3, 1.0, False),
            (4, 3, 2.0, True),
            (5, 2, 0.5, True),
            (6, 2, 2.0, False),
            (4, 4, 3.0, False),
            (5, 3, 4.0, False),
            (6, 2, 1.0, True),
            (5, 2, 6.0, False),
        ]
    )
]


@pytest.mark.parametrize("seed,n,d,scale,mem", CASES)
def test_every_bound_at_most_the_brute_force_optimum(seed, n, d, scale, mem):
    problem = _problem(100 + seed, n, d, comm_scale=scale, binding_memory=mem)
    opt = brute_force_makespan(problem)
    report = best_bound(problem)
    assert "transfer_flow" in report.values
    for name, value in report.values.items():
        assert value <= opt * (1 + 1e-9) + 1e-9, (name, value, opt)


@pytest.mark.parametrize("seed", range(6))
def test_transfer_flow_contains_the_load_lp(seed):
    problem = _problem(200 + seed, 7, 3, comm_scale=2.0)
    assert transfer_flow(problem) >= fractional_load(problem) * (1 - 1e-5) - 1e-9


def test_transfer_flow_sees_paths_the_load_lp_drops():
    # two parallel tasks of 10 joined by a task of 1, transfers of 5: the optimum splits them (10 + 5 + 1);
    # the load LP says 10.5, the transfer-flow LP at least the path 10 + 1
    ids = ["a", "b", "j"]
    time = np.array([[10.0, 10.0], [10.0, 10.0], [1.0, 1.0]])
    comm = np.array([[[0, 5.0], [5.0, 0]], [[0, 5.0], [5.0, 0]]])
    problem = make_placement_problem(ids, ["x", "y"], time, np.ones(3), np.full(2, 10.0), [("a", "j"), ("b", "j")], comm)
    opt = brute_force_makespan(problem)
    assert opt == pytest.approx(16.0)
    value = transfer_flow(problem)
    assert fractional_load(problem) < value <= opt + 1e-9
    assert value == pytest.approx(11.0, rel=1e-5)
    assert device_path(problem).value == pytest.approx(11.0)


def _side_branch_problem(seed: int, d: int = 2):
    """A chain of 6 tasks and a side branch of 2 tasks into its last task (no useful decomposition)."""
    rng = np.random.default_rng(seed)
    ids = [f"c{i}" for i in range(6)] + ["s0", "s1"]
    edges = [(f"c{i}", f"c{i + 1}") for i in range(5)] + [("s0", "s1"), ("s1", "c5")]
    time = rng.integers(1, 8, size=(len(ids), d)).astype(float)
    comm = rng.integers(1, 6, size=(len(edges), d, d)).astype(float)
    for e in range(len(edges)):
        np.fill_diagonal(comm[e], 0.0)
    return make_placement_problem(ids, [f"d{k}" for k in range(d)], time, np.ones(len(ids)), np.full(d, 100.0), edges, comm)


@pytest.mark.parametrize("seed", range(4))
def test_induced_subgraph_optimum_at_most_the_whole(seed):
    from milp_partition.placement.subgraph import induced

    problem = _problem(400 + seed, 6, 2, comm_scale=2.0)
    whole = brute_force_makespan(problem)
    rng = np.random.default_rng(seed)
    keep = sorted(rng.choice(6, size=4, replace=False).tolist())
    assert brute_force_makespan(induced(problem, keep)) <= whole + 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_main_line_bound_at_most_the_optimum(seed):
    from milp_partition.placement.decompose import decompose
    from milp_partition.placement.solve import PlacementSolveSettings, solve_placement
    from milp_partition.placement.subgraph import main_line

    problem = _side_branch_problem(500 + seed)
    assert not decompose(problem).useful
    line = main_line(problem)
    assert line is not None and len(line[0]) == 6  # the chain
    opt = brute_force_makespan(problem)
    settings = PlacementSolveSettings(time_limit_s=20, threads=1, quick_solve_s=0.0)
    result = solve_placement(problem, settings)
    assert result.bound <= opt + 1e-9 and result.objective >= opt - 1e-9
    # the main-line step itself (the chain above may have ended before it)
    from milp_partition.budget import Budget
    from milp_partition.chain import Run, chain_settings
    from milp_partition.placement.solve import _run_main_line
    from milp_partition.result import Result

    run = Run(
        problem, problem, chain_settings(settings), Result("placement", "cpsat"), Budget.starting_now(settings.time_limit_s)
    )
    out = _run_main_line(problem, settings, run, line)
    assert out.bound is not None and 0.0 < out.bound <= opt + 1e-9
    # the schedule is one of the whole problem: the main line's, extended and improved by the local search
    from milp_partition.verifiers.placement import verify_placement

    assert out.solution is not None
    report = verify_placement(problem, out.solution)
    assert report.feasible and report.makespan >= opt - 1e-9
    assert run.result.solver_notes["local_search"]["makespan"] == pytest.approx(report.makespan)
    assert run.result.solver_notes["main_line"]["bound"] == out.bound
