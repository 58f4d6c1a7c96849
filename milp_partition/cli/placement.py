"""The placement problem behind ``milp-partition solve | evaluate | info`` (``--problem placement``).

:mod:`milp_partition.cli.dispatch` detects a ``placement-instance/1`` file (or takes
``--problem placement``) and hands the parsed arguments here.  Errors are raised
as :class:`~milp_partition.errors.InputError` and printed by the CLI on one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal, cast

import numpy as np

from milp_partition.cli.claims import check_claims, read_result
from milp_partition.cli.exit_codes import EXIT_INFEASIBLE, EXIT_OK
from milp_partition.cli.output import emit
from milp_partition.errors import InputError
from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.io.placement_instance import looks_like_placement_instance, placement_from_dict
from milp_partition.io.plans import read_plan
from milp_partition.placement.bounds import best_bound
from milp_partition.placement.convert import placement_from_instance_file
from milp_partition.placement.decompose import decompose
from milp_partition.placement.problem import PlacementProblem, PlacementSettings, PlacementSolution
from milp_partition.placement.solve import PlacementSolveSettings, solve_placement
from milp_partition.report import device_counts, gap_text, run_lines, unit_label
from milp_partition.report import fmt as _fmt
from milp_partition.result import Result
from milp_partition.settings import common_fields
from milp_partition.verifiers.placement import simulate_placement, verify_placement


def claims(data: object) -> bool:
    """A ``placement-instance/1`` JSON object."""
    return isinstance(data, dict) and data.get("format") == "placement-instance/1"


def problem_from_args(args: argparse.Namespace) -> PlacementProblem:
    """Read the instance (``placement-instance/1``, or a native graph with a cluster) under the command line's settings."""

    memory_model = getattr(args, "memory_model", "static") or "static"
    if memory_model not in ("static", "liveness"):
        raise InputError(f"{memory_model} does not apply to placement; use static or liveness", where="--memory-model")
    settings = PlacementSettings(
        link_contention=bool(getattr(args, "link_contention", False)),
        memory_model=cast(Literal["static", "liveness"], memory_model),
    )
    source = str(args.instance)
    text = read_text_file(args.instance)
    data = parse_json(text, source) if text.lstrip()[:1] == "{" else None
    if looks_like_placement_instance(data):
        return placement_from_dict(data, source, settings)

    return placement_from_instance_file(args.instance, settings=settings)


def format_report(result: Result, problem: PlacementProblem, max_rows: int = 20) -> str:
    """A readable report of a placement result."""
    unit = unit_label(result.time_unit)
    s = problem.settings
    lines = [
        f"instance   {problem.name or '-'}  ({problem.num_tasks} tasks, {problem.num_edges} edges, {problem.num_devices} devices)",
        f"problem    placement, memory model {s.memory_model}, link contention {'on' if s.link_contention else 'off'}",
        "cluster    memory "
        + ", ".join(f"{d} {_fmt(float(m))}" for d, m in zip(problem.device_ids, problem.device_memory, strict=True))
        + f" ({problem.memory_unit}); transfers as the file's times per device pair",
        f"status     {result.status.upper()}" + (f"  ({result.message})" if result.message else ""),
    ]
    if result.objective is not None:
        lines.append(f"objective  makespan = {_fmt(result.objective)} {unit}   (simulated and verified)")
        lines.append(f"bound      {_fmt(result.bound)}   gap {gap_text(result.gap)}")
    bounds = result.solver_notes.get("bounds")
    if bounds:
        lines.append("bounds     " + ", ".join(f"{k} {_fmt(v, 7)}" for k, v in bounds.items()))
    lines.extend(run_lines(result, name_width=13))
    if result.assignment:
        counts = device_counts(result, problem.device_ids)
        lines.append("")
        lines.append(f"{'device':10s} {'tasks':>6s} {'busy (' + unit + ')':>16s} {'memory':>14s}")
        for dev in problem.device_ids:
            lines.append(
                f"{dev:10s} {counts.get(dev, 0):6d} {_fmt(result.loads.get(dev, 0.0)):>16s} {_fmt(result.memory_bytes.get(dev)):>14s}"
            )
        lines.append("")
        lines.append(f"{'task':12s} {'device':10s} {'start':>12s}")
        for k, (task, start) in enumerate(sorted(result.starts.items(), key=lambda kv: (kv[1], kv[0]))):
            if k == max_rows:
                lines.append(f"... {len(result.starts) - max_rows} more in the result JSON (--output)")
                break
            lines.append(f"{task:12s} {result.assignment[task]:10s} {_fmt(start):>12s}")
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    """``solve`` for a placement instance."""

    problem = problem_from_args(args)
    names: tuple[str, ...] | None = None
    if getattr(args, "heuristic", None):
        names = tuple(n.strip() for item in args.heuristic for n in item.split(",") if n.strip())
        for name in names:
            if name not in PLACEMENT_HEURISTICS:
                raise InputError(f"unknown heuristic {name!r}; known: {', '.join(PLACEMENT_HEURISTICS)}", where="--heuristic")
    if getattr(args, "no_heuristics", False):
        names = ()
    settings = PlacementSolveSettings(
        **common_fields(args.common),  # type: ignore[arg-type]
        heuristics=names,
    )
    result = solve_placement(problem, settings)
    result.instance["source"] = str(args.instance)  # 'plot' reads the task times from it
    return emit(result, args, lambda: format_report(result, problem))


def read_schedule(path: Path, problem: PlacementProblem) -> PlacementSolution:
    """A plan file or result JSON (``assignment`` and ``starts``) or ``{task: {"device": id, "start": t}}`` as a
    schedule (:mod:`milp_partition.io.plans`); devices without starts: the semi-active schedule in topological order."""
    plan = read_plan(path, "placement", problem)
    assert isinstance(plan, PlacementSolution)
    device, start, tstart = plan.device, plan.start, plan.transfer_start
    if np.isnan(start).any():
        if not np.isnan(start).all():
            i = int(np.flatnonzero(np.isnan(start))[0])
            raise InputError(
                "the solution gives starts for some tasks but not this one",
                source=str(path),
                where=f"task {problem.task_ids[i]!r}",
            )

        return simulate_placement(problem, device)  # devices only: the semi-active schedule in topological order
    return PlacementSolution(device, start, tstart)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``evaluate`` for a placement instance: verify a schedule and print the simulator's makespan."""

    problem = problem_from_args(args)
    report = verify_placement(problem, read_schedule(args.solution, problem))
    if not report.feasible:
        print("INFEASIBLE schedule:")
        for line in report.violations:
            print(f"  - {line}")
        return EXIT_INFEASIBLE
    check_claims(
        read_result(args.solution),
        args.solution,
        "placement",
        report.makespan,
        {"loads": dict(report.device_load), "memory_bytes": dict(report.peak_memory)},
        {"tasks": problem.num_tasks, "edges": problem.num_edges, "devices": list(problem.device_ids)},
    )
    print(
        f"feasible; makespan = {_fmt(report.makespan)} {unit_label(problem.time_unit)} (simulated; as given {_fmt(report.given_makespan)})"
    )
    for dev in problem.device_ids:
        print(f"  {dev:10s} busy {_fmt(report.device_load.get(dev, 0.0)):>14s}  memory {_fmt(report.peak_memory.get(dev)):>14s}")
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    """``info`` for a placement instance: sizes and lower bounds."""

    problem = problem_from_args(args)
    b = best_bound(problem)
    dec = decompose(problem)
    print(f"file        {args.instance}")
    print(
        f"placement   {problem.name or '-'}: {problem.num_tasks} tasks, {problem.num_edges} edges, {problem.num_devices} devices, "
        f"time unit {problem.time_unit}, memory unit {problem.memory_unit}"
    )
    for k, dev in enumerate(problem.device_ids):
        col = np.where(np.isfinite(problem.time[:, k]), problem.time[:, k], 0.0)
        print(
            f"device      {dev:8s} memory {_fmt(float(problem.device_memory[k]))}, work {_fmt(float(col.sum()))} (all tasks there)"
        )
    print(f"memory      tasks need {_fmt(float(problem.task_memory.sum()))} in all")
    print("bounds      " + ", ".join(f"{k} {_fmt(v, 7)}" for k, v in b.values.items()))
    print(
        f"structure   {len(dec.bottlenecks)} bottleneck tasks, {len(dec.segments)} segments, "
        f"largest {max((len(s.inner) for s in dec.segments), default=0)} inner tasks"
    )
    return EXIT_OK
