"""The placement local search and the extension of an induced schedule: feasible, never worse, against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from milp_partition.heuristics.list_scheduling import heft

from milp_partition.placement.extend import consistent_priorities, extend_schedule
from milp_partition.placement.local_search import LocalSearchSettings, critical_tasks, improve_by_moves
from milp_partition.placement.problem import make_placement_problem
from milp_partition.placement.subgraph import induced
from milp_partition.verifiers.placement import simulate_placement, verify_placement
from tests.placement_brute_force import brute_force_makespan

#: Enough passes to end on a local optimum on these tiny instances (the search stops by itself there).
SETTINGS = LocalSearchSettings(time_limit_s=1e6, max_passes=1000)


def _problem(seed: int, n: int, d: int, *, tight_memory: bool = False):
    rng = np.random.default_rng(seed)
    time = rng.integers(1, 10, size=(n, d)).astype(float)
    time[rng.random((n, d)) < 0.15] = np.inf
    for i in range(n):
        if not np.isfinite(time[i]).any():
            time[i, rng.integers(d)] = 5.0
    edges = [(f"t{i}", f"t{j}") for i in range(n) for j in range(i + 1, n) if rng.random() < 0.4]
    comm = rng.integers(0, 6, size=(len(edges), d, d)).astype(float)
    for e in range(len(edges)):
        np.fill_diagonal(comm[e], 0.0)
    memory = rng.integers(1, 5, size=n).astype(float)
    capacity = np.full(d, memory.sum() if not tight_memory else np.ceil(memory.sum() / d) + 2)
    capacity = np.maximum(capacity, memory.max())
    return make_placement_problem([f"t{i}" for i in range(n)], [f"d{k}" for k in range(d)], time, memory, capacity, edges, comm)


def _single_device_start(problem):
    """Every task on the device that runs them all fastest (a poor start the search can improve)."""
    k = int(np.argmin(np.where(np.isfinite(problem.time), problem.time, 1e9).sum(axis=0)))
    device = np.where(np.isfinite(problem.time[:, k]), k, np.argmin(problem.time, axis=1))
    return simulate_placement(problem, device)


@pytest.mark.parametrize("seed", range(8))
def test_local_search_never_worse_feasible_and_at_least_the_optimum(seed):
    # (under tight memory the start is heft's, which is feasible)
    problem = _problem(700 + seed, 5, 2 + seed % 3 // 2, tight_memory=seed % 2 == 1)
    start = heft(problem) if seed % 2 else _single_device_start(problem)
    before = verify_placement(problem, start)
    after = verify_placement(problem, improve_by_moves(problem, start, SETTINGS))
    assert after.feasible, after.violations
    assert after.makespan <= before.makespan + 1e-9
    assert after.makespan >= brute_force_makespan(problem) - 1e-9


def test_local_search_spreads_independent_tasks():
    # four independent tasks of 1 on one of two identical devices: a move halves the makespan (the optimum)
    time = np.ones((4, 2))
    problem = make_placement_problem(
        [f"t{i}" for i in range(4)], ["a", "b"], time, np.ones(4), np.full(2, 4.0), [], np.zeros((0, 2, 2))
    )
    start = simulate_placement(problem, np.zeros(4, dtype=np.int64))
    assert verify_placement(problem, start).makespan == pytest.approx(4.0)
    assert verify_placement(problem, improve_by_moves(problem, start, SETTINGS)).makespan == pytest.approx(2.0)


def test_local_search_respects_memory():
    # the same four tasks, but device b holds one task only: the best it can do is 3
    time = np.ones((4, 2))
    problem = make_placement_problem(
        [f"t{i}" for i in range(4)], ["a", "b"], time, np.ones(4), np.array([4.0, 1.0]), [], np.zeros((0, 2, 2))
    )
    out = improve_by_moves(problem, simulate_placement(problem, np.zeros(4, dtype=np.int64)), SETTINGS)
    report = verify_placement(problem, out)
    assert report.feasible and report.makespan == pytest.approx(3.0)
    assert int((np.asarray(out.device) == 1).sum()) == 1


def test_critical_tasks_of_a_chain_and_of_independent_tasks():
    chain = make_placement_problem(
        ["a", "b", "c"],
        ["x"],
        np.array([[1.0], [2.0], [3.0]]),
        np.zeros(3),
        np.ones(1),
        [("a", "b"), ("b", "c")],
        np.zeros((2, 1, 1)),
    )
    assert critical_tasks(chain, simulate_placement(chain, np.zeros(3, dtype=np.int64))).tolist() == [0, 1, 2]
    # two devices, independent tasks of 1 and 3: only the longer one is critical
    two = make_placement_problem(
        ["a", "b"], ["x", "y"], np.array([[1.0, 1.0], [3.0, 3.0]]), np.zeros(2), np.ones(2), [], np.zeros((0, 2, 2))
    )
    assert critical_tasks(two, simulate_placement(two, np.array([0, 1]))).tolist() == [1]


@pytest.mark.parametrize("seed", range(6))
def test_extension_keeps_the_induced_schedule_and_is_feasible(seed):
    problem = _problem(800 + seed, 6, 2, tight_memory=seed % 2 == 1)
    rng = np.random.default_rng(seed)
    kept = np.sort(rng.choice(6, size=4, replace=False))
    sub = induced(problem, kept)
    sub_solution = heft(sub)
    reference = heft(problem) if seed % 2 else None
    whole = extend_schedule(problem, kept, sub_solution, reference)
    assert whole is not None
    report = verify_placement(problem, whole)
    assert report.feasible, report.violations
    assert np.array_equal(np.asarray(whole.device)[kept], np.asarray(sub_solution.device))
    assert report.makespan >= brute_force_makespan(problem) - 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_consistent_priorities_follow_the_edges(seed):
    problem = _problem(900 + seed, 8, 2)
    rng = np.random.default_rng(seed)
    device = rng.integers(0, 2, size=8)
    device = np.where(np.isfinite(problem.time[np.arange(8), device]), device, 1 - device)
    priority = consistent_priorities(problem, device, rng.random(8) * 20)
    dur = problem.time[np.arange(8), device]
    for i, j in zip(problem.edge_source.tolist(), problem.edge_target.tolist()):
        assert priority[j] >= priority[i] + dur[i]
    simulate_placement(problem, device, priority)  # no deadlock
