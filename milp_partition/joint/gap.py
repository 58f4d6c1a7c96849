"""The joint problem in ``gap`` sweeps: Piper-style, PipeDream-2BW-style and all-data-parallel against the exact solve.

Every baseline's plan is scored by :func:`verify_joint` (its time per sample in
seconds); the exact row carries :func:`solve_joint`'s verified value, proven bound and
status.  Grid axes: ``devices`` (k), ``memory`` (per device), ``micro_batches`` (N) and
``bandwidth`` (per device to the outside); an axis not swept keeps the file's value
(Piper's files carry placeholders: sweep at least ``--devices``, ``--memory`` and
``--bandwidth``).  A baseline's time includes indexing the graph (its ideals), which
each baseline needs; Piper-style runs under the sweep's ``--time-limit``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from milp_partition.errors import InputError
from milp_partition.heuristics.joint_baselines import all_data_parallel, pipedream_2bw_style, piper_style
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.io.piper import looks_like_joint, read_joint
from milp_partition.joint.dp import JointData, TooManyIdeals, joint_data
from milp_partition.joint.problem import JointPlan, JointProblem, JointSolveSettings
from milp_partition.joint.solve import solve_joint
from milp_partition.sweep.jobs import EXACT, GapJob, exact_row, heuristic_row
from milp_partition.units import parse_bytes, parse_rate
from milp_partition.verifiers.joint import verify_joint

OBJECTIVE = "time per sample"
AXES: Mapping[str, tuple[str, ...] | None] = {"devices": None, "memory": None, "micro_batches": None, "bandwidth": None}

#: Cap on the ideals a baseline enumerates (the exact solve's default).
MAX_IDEALS = JointSolveSettings().max_ideals

#: Heuristic name -> ``(indexed problem, time limit in s) -> (plan or None, value)``.
HEURISTIC_FUNCTIONS: Mapping[str, Callable[[JointData, float], tuple[JointPlan | None, float]]] = {
    "piper-style": lambda data, limit_s: piper_style(data, time_limit_s=limit_s),
    "pipedream-2bw": lambda data, limit_s: pipedream_2bw_style(data),
    "all-data-parallel": lambda data, limit_s: all_data_parallel(data),
}
HEURISTICS: tuple[str, ...] = tuple(HEURISTIC_FUNCTIONS)


def recognize(path: Path) -> str | None:
    """``None`` for Piper's JSON or a ``milp-partition-joint/1`` file, else why it is not one."""
    try:
        data = parse_json(read_text_file(path), str(path))
    except InputError as exc:
        return str(exc)
    return None if looks_like_joint(data) else "not a joint-problem file (Piper's JSON or milp-partition-joint/1)"


def load(path: str | Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> JointProblem:
    """The instance with the point's devices, memory, micro-batches and bandwidth over the file's."""
    p = dict(point)
    overrides: dict[str, float | int] = {}
    if "devices" in p:
        overrides["devices"] = int(p["devices"])
    if "memory" in p:
        overrides["memory_bytes"] = float(parse_bytes(p["memory"], "--memory"))
    if "micro_batches" in p:
        overrides["microbatches"] = int(p["micro_batches"])
    if "bandwidth" in p:
        overrides["bandwidth_bytes_per_s"] = parse_rate(p["bandwidth"], "--bandwidth")
    return read_joint(path, **overrides)


def check(path: Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> None:
    load(path, point, options)


def run(job: GapJob) -> dict[str, str]:
    """One baseline or the exact solve on one instance at one point: a CSV row."""
    problem = load(job.path, job.point, dict(job.options))
    base = {"size": str(len(problem.nodes)), "unit": "s"}
    if job.method == EXACT:
        result = solve_joint(problem, JointSolveSettings(time_limit_s=job.time_limit_s, threads=job.threads))
        return exact_row(job, result, base)
    baseline = HEURISTIC_FUNCTIONS.get(job.method)
    if baseline is None:
        raise InputError(f"unknown joint heuristic {job.method!r}; known: {', '.join(HEURISTICS)}")

    def heuristic() -> tuple[JointPlan | None, str]:
        try:
            data = joint_data(problem, MAX_IDEALS)
        except TooManyIdeals as exc:
            return None, str(exc)
        plan, _ = baseline(data, job.time_limit_s)
        return plan, "" if plan is not None else "no plan fits"

    def verify(plan: JointPlan) -> tuple[bool, float, list[str]]:
        report = verify_joint(problem, plan)
        return report.feasible, report.objective, report.violations

    return heuristic_row(job, base, heuristic, verify)
