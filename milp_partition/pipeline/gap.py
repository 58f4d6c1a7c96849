"""The pipeline problem in ``gap`` sweeps: chain DP, ideal DP, equal split and greedy against the exact solve.

Every heuristic's split is scored by :func:`verify_pipeline` (its time per sample);
the exact row carries :func:`solve_pipeline`'s verified value, proven bound and
status.  Grid axes: ``devices`` and ``memory`` (identical accelerators replacing the
instance's, keeping its CPU cores and link) and ``memory_model`` (static, 1f1b).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from milp_partition.cluster import homogeneous_cluster
from milp_partition.errors import InputError, MilpPartitionError
from milp_partition.heuristics.pipeline_dp import chain_dp, ideal_dp
from milp_partition.heuristics.pipeline_simple import equal_split, greedy_fill
from milp_partition.io import detect_format, read_instance
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings, PipelineSolution
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
from milp_partition.sweep.jobs import EXACT, GapJob
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
    t0 = time.perf_counter()
    if job.method == EXACT:
        result = solve_pipeline(problem, SolveSettings(time_limit_s=job.time_limit_s, threads=job.threads, seed=job.seed))
        return job.row(
            status=result.status, value=result.objective, bound=result.bound,
            seconds=f"{result.solve_seconds:.4g}", message=result.message, **base,
        )  # fmt: skip
    try:
        solution, message = HEURISTIC_FUNCTIONS[job.method](problem)
    except KeyError:
        raise InputError(f"unknown pipeline heuristic {job.method!r}; known: {', '.join(HEURISTICS)}") from None
    except MilpPartitionError as exc:
        return job.row(status="failed", seconds=f"{time.perf_counter() - t0:.4g}", message=str(exc), **base)
    seconds = f"{time.perf_counter() - t0:.4g}"
    if solution is None:
        return job.row(status="failed", seconds=seconds, message=message, **base)
    report = verify_pipeline(problem, solution)
    if not report.feasible:
        return job.row(status="rejected", seconds=seconds, message="verifier: " + "; ".join(report.violations[:3]), **base)
    return job.row(status="feasible", value=report.objective, seconds=seconds, **base)
