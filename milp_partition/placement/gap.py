"""The placement problem in ``gap`` sweeps: the five list schedulers against the exact solve.

Heuristic makespans are the independent simulator's (:func:`verify_placement`);
the exact row carries :func:`solve_placement`'s verified makespan, proven bound and
status; the ``bound`` row (``--no-exact``) the cheap proven bounds of
:mod:`milp_partition.placement.bounds`.  Grid axes: ``memory_model`` (static,
liveness); option ``link_contention``.  Devices and memory are the instance's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from milp_partition.errors import InputError
from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS, run_placement_heuristic
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.io.placement_instance import looks_like_placement_instance, read_placement_instance
from milp_partition.placement.bounds import best_bound
from milp_partition.placement.problem import PlacementProblem, PlacementSettings, PlacementSolution
from milp_partition.placement.solve import PlacementSolveSettings, solve_placement
from milp_partition.sweep.jobs import BOUND, EXACT, GapJob, exact_row, heuristic_row
from milp_partition.verifiers.placement import verify_placement

HEURISTICS: tuple[str, ...] = tuple(PLACEMENT_HEURISTICS)
AXES: Mapping[str, tuple[str, ...] | None] = {"memory_model": ("static", "liveness")}
OBJECTIVE = "makespan"


def recognize(path: Path) -> str | None:
    """``None`` for a ``placement-instance/1`` file, else why it is not one."""
    try:
        data = parse_json(read_text_file(path), str(path))
    except InputError as exc:
        return str(exc)
    return None if looks_like_placement_instance(data) else "not a placement-instance/1 file"


def load(path: str | Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> PlacementProblem:
    """The instance under the point's memory model and the options' link contention."""
    settings = PlacementSettings(
        link_contention=options.get("link_contention", "0") == "1",
        memory_model=dict(point).get("memory_model", "static"),  # type: ignore[arg-type]
    )
    return read_placement_instance(path, settings)


def check(path: Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> None:
    load(path, point, options)


def run(job: GapJob) -> dict[str, str]:
    """One heuristic, the exact solve or the cheap bounds on one instance: a CSV row."""
    problem = load(job.path, job.point, dict(job.options))
    base = {"size": str(problem.num_tasks), "unit": problem.time_unit}
    if job.method == EXACT:
        result = solve_placement(
            problem, PlacementSolveSettings(solver="cpsat", time_limit_s=job.time_limit_s, threads=job.threads, seed=job.seed)
        )
        return exact_row(job, result, base)
    if job.method == BOUND:
        t0 = time.perf_counter()
        bounds = best_bound(problem)
        return job.row(status="bound", bound=bounds.best, seconds=f"{time.perf_counter() - t0:.4g}", **base)

    def verify(solution: PlacementSolution) -> tuple[bool, float, list[str]]:
        report = verify_placement(problem, solution)
        return report.feasible, report.makespan, list(report.violations)

    return heuristic_row(job, base, lambda: (run_placement_heuristic(job.method, problem), ""), verify)
