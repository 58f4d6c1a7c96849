"""The pipeline problem in ``gap`` sweeps: chain DP, ideal DP, equal split and greedy against the exact solve.

Every heuristic's split is scored by :func:`verify_pipeline` (its time per sample);
the exact row carries :func:`solve_pipeline`'s verified value, proven bound and
status.  Grid axes: ``devices`` and ``memory`` (identical accelerators replacing the
instance's, keeping its CPU cores and link) and ``memory_model`` (static, 1f1b).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from milp_partition.cluster import homogeneous_cluster
from milp_partition.errors import InputError
from milp_partition.heuristics.pipeline_dp import chain_dp, ideal_dp
from milp_partition.heuristics.pipeline_simple import equal_split, greedy_fill
from milp_partition.io import detect_format, read_instance
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings, PipelineSolution
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
from milp_partition.sweep.jobs import EXACT, GapJob, exact_row, heuristic_row
from milp_partition.units import parse_bytes
from milp_partition.verifiers.pipeline import verify_pipeline

OBJECTIVE = "time per sample"
AXES: Mapping[str, tuple[str, ...] | None] = {"devices": None, "memory": None, "memory_model": ("static", "1f1b")}


def _dp(fn: Callable[[PipelineProblem], object]) -> Callable[[PipelineProblem], tuple[PipelineSolution | None, str]]:
    def run(problem: PipelineProblem) -> tuple[PipelineSolution | None, str]:
        out = fn(problem)
        return out.solution, out.message  # type: ignore[attr-defined]

    return run


def _plain(fn: Callable[[PipelineProblem], PipelineSolution]) -> Callable[[PipelineProblem], tuple[PipelineSolution | None, str]]:
    return lambda problem: (fn(problem), "")


#: Heuristic name -> ``problem -> (split or None, message)``.
HEURISTIC_FUNCTIONS: Mapping[str, Callable[[PipelineProblem], tuple[PipelineSolution | None, str]]] = {
    "chain-dp": _dp(chain_dp),
    "ideal-dp": _dp(ideal_dp),
    "equal-split": _plain(equal_split),
    "greedy": _plain(greedy_fill),
}
HEURISTICS: tuple[str, ...] = tuple(HEURISTIC_FUNCTIONS)


def recognize(path: Path) -> str | None:
    """``None`` for a graph file (native, Tarnawski, node-link JSON or a PipeDream profile), else why not."""
    try:
        detect_format(path)
    except InputError as exc:
        return str(exc)
    return None


def load(path: str | Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> PipelineProblem:
    """The graph with the point's accelerators, memory and memory model."""
    instance = read_instance(path)
    p = dict(point)
    base = instance.cluster
    if base is None and "devices" not in p:
        raise InputError("this graph carries no cluster; give the sweep --devices N (and --memory SIZE)", source=str(path))
    cluster = base
    if "devices" in p or "memory" in p or base is None:
        count = int(p["devices"]) if "devices" in p else len(base.devices)  # type: ignore[union-attr]
        memory = (
            parse_bytes(p["memory"], "--memory")
            if "memory" in p
            else (base.devices[0].memory_bytes if base is not None and base.devices else None)
        )
        kind = base.devices[0].kind if base is not None and base.devices else "gpu"
        cluster = homogeneous_cluster(
            count, memory, kind=kind, host_cpu_cores=base.host_cpu_cores if base else 0,
            link=base.link if base else None, source=str(path),
        )  # fmt: skip
    settings = PipelineSettings(memory_model=p.get("memory_model", "static"))  # type: ignore[arg-type]
    return PipelineProblem(instance.graph, cluster, settings, source=str(path))  # type: ignore[arg-type]


def check(path: Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> None:
    load(path, point, options)


def run(job: GapJob) -> dict[str, str]:
    """One heuristic or the exact solve on one instance at one point: a CSV row."""
    problem = load(job.path, job.point, dict(job.options))
    base = {"size": str(len(problem.graph.nodes)), "unit": problem.graph.time_unit}
    if job.method == EXACT:
        result = solve_pipeline(problem, SolveSettings(time_limit_s=job.time_limit_s, threads=job.threads, seed=job.seed))
        return exact_row(job, result, base)
    heuristic = HEURISTIC_FUNCTIONS.get(job.method)
    if heuristic is None:
        raise InputError(f"unknown pipeline heuristic {job.method!r}; known: {', '.join(HEURISTICS)}")

    def verify(solution: object) -> tuple[bool, float, list[str]]:
        report = verify_pipeline(problem, solution)  # type: ignore[arg-type]
        return report.feasible, report.objective, report.violations

    return heuristic_row(job, base, lambda: heuristic(problem), verify)
