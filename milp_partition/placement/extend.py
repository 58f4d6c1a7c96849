r"""Extend a schedule of an induced subproblem (:mod:`milp_partition.placement.subgraph`) to the whole problem.

The kept tasks R keep their devices and their priorities (their starts in the
induced schedule).  The other tasks get one of a few simple placements: all on one
device k (for each device that can run them all), or the devices of a reference
schedule of the whole problem (e.g. the best heuristic's); their priorities are their
starts in the reference (0 without one).  Priorities are then made consistent with the
precedence edges (each at least its predecessors' priority plus their duration), so
each assignment simulates (:func:`~milp_partition.verifiers.placement.simulate_placement`)
without a deadlock.  The candidate with the least verified makespan wins.  It is a
heuristic schedule of the whole problem, meant as the start of a local search
(:mod:`milp_partition.placement.local_search`); the caller verifies it like any other.
"""

from __future__ import annotations

import numpy as np

from milp_partition.placement.problem import PlacementProblem, PlacementSolution
from milp_partition.verifiers.placement import ScheduleOrderError, simulate_placement, verify_placement


def consistent_priorities(problem: PlacementProblem, device: np.ndarray, priority: np.ndarray) -> np.ndarray:
    """``priority`` raised along the edges in topological order: at least each predecessor's priority plus its duration."""
    out = np.asarray(priority, dtype=np.float64).copy()
    dur = problem.time[np.arange(problem.num_tasks), device]
    ptr, pred, _ = problem.pred
    for j in problem.topological_order.tolist():
        ps = pred[ptr[j] : ptr[j + 1]]
        if len(ps):
            out[j] = max(out[j], float((out[ps] + dur[ps]).max()))
    return out


def extend_schedule(
    problem: PlacementProblem,
    kept: np.ndarray,
    sub_solution: PlacementSolution,
    reference: PlacementSolution | None = None,
) -> PlacementSolution | None:
    """The best whole schedule that keeps ``sub_solution`` on the tasks ``kept`` (see the module docstring).

    ``kept`` are task indices of ``problem`` in the order of the induced problem's tasks
    (sorted, as :func:`milp_partition.placement.subgraph.induced` keeps them).  ``None``
    when no candidate is feasible (e.g. memory).
    """
    n = problem.num_tasks
    kept = np.asarray(kept, dtype=np.int64)
    others = np.setdiff1d(np.arange(n), kept)
    device = np.zeros(n, dtype=np.int64)
    priority = np.zeros(n)
    device[kept] = np.asarray(sub_solution.device)
    priority[kept] = np.asarray(sub_solution.start, dtype=np.float64)
    if reference is not None:
        priority[others] = np.asarray(reference.start, dtype=np.float64)[others]
    choices = [np.full(len(others), k, dtype=np.int64) for k in range(problem.num_devices) if problem.allowed[others, k].all()]
    if reference is not None:
        choices.append(np.asarray(reference.device, dtype=np.int64)[others])
    best: tuple[float, PlacementSolution] | None = None
    for choice in choices:
        device[others] = choice
        try:
            sol = simulate_placement(problem, device, consistent_priorities(problem, device, priority))
        except ScheduleOrderError:  # (consistent priorities never deadlock; kept as a guard)
            continue
        report = verify_placement(problem, sol)
        if report.feasible and (best is None or report.makespan < best[0]):
            best = (report.makespan, report.schedule or sol)
    return None if best is None else best[1]
