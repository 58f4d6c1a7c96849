"""CLI part of the joint problem (Piper's): ``solve | evaluate | info`` on a Piper or ``milp-partition-joint/1`` file.

:mod:`milp_partition.cli.dispatch` detects the problem (``--problem joint`` or :func:`claims`)
and calls :func:`cmd_solve`, :func:`cmd_evaluate` or :func:`cmd_info`.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

from milp_partition.cli.claims import check_claims, read_result
from milp_partition.cli.export import write_export
from milp_partition.cli.joint_mixed import cmd_evaluate_mixed, cmd_solve_mixed
from milp_partition.cli.joint_run import cmd_solve_run
from milp_partition.cli.options import flag_name, reserved
from milp_partition.cli.output import emit
from milp_partition.cluster import MAX_DEVICES
from milp_partition.errors import InputError
from milp_partition.io.imported_layers import looks_like_imported
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.io.piper import file_cluster, joint_from_dict, looks_like_joint, read_joint
from milp_partition.io.plans import plan_from_json
from milp_partition.io.plans import read_plan as read_plan_file
from milp_partition.joint.layers import (
    ALLOWED_TP_DEGREES,
    DEFAULT_MICROBATCHES,
    LayerPlanSettings,
    joint_from_imported,
    parse_tp_degrees,
)
from milp_partition.joint.problem import JointPlan, JointProblem, JointShape, JointSolveSettings
from milp_partition.joint.solve import JointResult, solve_joint, stage_rows
from milp_partition.joint.space import solve_in_space
from milp_partition.report import fmt, fmt_bytes, gap_text, memory_margin_lines, names_span, run_lines
from milp_partition.settings import common_fields
from milp_partition.units import format_rate, parse_bytes, parse_rate
from milp_partition.verifiers.joint import verify_joint

EXIT_OK, EXIT_INFEASIBLE = 0, 3


def claims(data: object) -> bool:
    """Piper's JSON (nodes with ``TMPCs``) or ``milp-partition-joint/1``."""
    return looks_like_joint(data)


def problem_from_args(args: argparse.Namespace) -> JointProblem:
    """Read the instance with the command line's cluster figures over the file's (an imported graph: :func:`imported_problem`)."""
    if getattr(args, "microbatches", None) is not None and args.microbatches < 1:
        raise InputError(f"--microbatches must be a positive integer, got {args.microbatches}")
    if getattr(args, "devices", None) is not None and args.devices < 1:
        raise InputError(f"--devices must be a positive integer, got {args.devices}")
    problem = _problem(args)
    memory = reserved(problem.memory_bytes, args)  # --memory-reserve stays free of the plan
    assert memory is not None
    shape = shape_from_args(args)
    if shape is not None and shape.tensor_parallel is not None and shape.tensor_parallel not in problem.degrees:
        raise InputError(
            f"{shape.tensor_parallel} is not a tensor-parallel degree this instance offers ({', '.join(map(str, problem.degrees))}); "
            + ("add it to --tp-degrees" if args.tp_degrees is not None else "offer it with --tp-degrees")
            + " or leave out --tensor-parallel",
            where="--tensor-parallel",
        )
    return replace(problem, cluster=problem.cluster.with_memory(memory), shape=shape)


def shape_from_args(args: argparse.Namespace) -> JointShape | None:
    """``--stages``, ``--data-parallel`` and ``--tensor-parallel`` as a forced :class:`JointShape` (``None`` when neither is given)."""
    stages, dp, tp = getattr(args, "stages", None), getattr(args, "data_parallel", None), getattr(args, "tensor_parallel", None)
    for flag, value in (("stages", stages), ("data_parallel", dp), ("tensor_parallel", tp)):
        if value is not None and value < 1:
            raise InputError(f"must be a positive integer, got {value}", where=flag_name(flag))
    if getattr(args, "method", None) == "milp" and (stages, dp, tp) != (None, None, None):
        raise InputError("a forced shape is solved by the exact DP only; leave out --method milp", where="--stages")
    return None if (stages, dp, tp) == (None, None, None) else JointShape(stages, dp, tp)


def _problem(args: argparse.Namespace) -> JointProblem:
    data = parse_json(read_text_file(args.instance), str(args.instance))
    if looks_like_imported(data):
        return imported_problem(data, args)
    for flag in ("tp_degrees", "profile"):
        if getattr(args, flag, None) is not None:
            raise InputError("applies only to a graph written by 'milp-partition import'; leave it out", where=flag_name(flag))
    return joint_from_dict(
        data,
        str(args.instance),
        devices=getattr(args, "devices", None),
        memory_bytes=parse_bytes(str(args.memory), "--memory") if getattr(args, "memory", None) is not None else None,
        bandwidth_bytes_per_s=parse_rate(str(args.bandwidth), "--bandwidth") if getattr(args, "bandwidth", None) else None,
        microbatches=getattr(args, "microbatches", None),
    )


def imported_problem(data: object, args: argparse.Namespace) -> JointProblem:
    """The joint problem of a graph written by ``milp-partition import`` (:mod:`milp_partition.joint.layers`)."""
    source = str(args.instance)
    missing = [f for f, v in (("--devices K", args.devices), ("--memory SIZE", args.memory)) if v is None]
    if missing:
        raise InputError("planning an imported graph needs " + " and ".join(missing), source=source)
    settings = LayerPlanSettings(
        devices=args.devices,
        memory_bytes=parse_bytes(str(args.memory), "--memory"),
        bandwidth_bytes_per_s=parse_rate(str(args.bandwidth), "--bandwidth") if args.bandwidth else None,
        microbatches=args.microbatches if args.microbatches is not None else DEFAULT_MICROBATCHES,
        tp_degrees=parse_tp_degrees(args.tp_degrees) if args.tp_degrees is not None else ALLOWED_TP_DEGREES,
        profile=args.profile,
    )
    return joint_from_imported(data, source, settings)


def format_report(result: JointResult, problem: JointProblem) -> str:
    """A readable report: status, objective, bound, the runs, and the stages as a table."""
    cl = problem.cluster
    lines = [
        f"instance   {problem.source}  ({len(problem.nodes)} nodes, {len(problem.edges)} edges, tensor-parallel degrees "
        f"{list(problem.degrees)})",
        f"cluster    {cl.device_count} devices, {fmt_bytes(problem.memory_bytes)} each, bandwidth {format_rate(cl.bandwidth_bytes_per_s)}, "
        f"N = {problem.microbatches}",
        "problem    joint (stages x data x tensor parallelism x recomputation)",
        "memory     in flight (Piper): a stage keeps its parameters and optimizer state plus y micro-batches of "
        "activations (the y column)",
        *(
            [
                f"shape      forced: stages {problem.shape.stages or 'free'}, data-parallel "
                f"{problem.shape.data_parallel or 'free'}, tensor-parallel {problem.shape.tensor_parallel or 'free'}"
            ]
            if problem.shape is not None
            else []
        ),
        *(f"note       {n}" for n in problem.notes),
        f"status     {result.status.upper()}" + (f"  ({result.message})" if result.message else ""),
    ]
    if result.objective is not None:
        lines.append(f"objective  time_per_sample = {fmt(result.objective, 12)} s   (verified)")
        lines.append(f"bound      {fmt(result.bound, 12)}   gap {gap_text(result.gap)}")
        lines.append(step_line(result.objective, result.bound, problem.microbatches))
    lines += memory_margin_lines(
        {f"stage {q + 1} (per device)": st["memory_bytes"] for q, st in enumerate(result.stages)},
        {f"stage {q + 1} (per device)": problem.memory_bytes for q in range(len(result.stages))},
    )
    lines.extend(run_lines(result, digits=12))
    if result.stages:
        lines.append("")
        lines.append(
            f"{'stage':>5s} {'nodes':>6s} {'d':>4s} {'t':>3s} {'devices':>8s} {'y':>5s} {'time/sample (s)':>16s} {'mem/device':>12s}  "
            "recomputed  layers"
        )
        names = {n.id: n.name or n.id for n in problem.nodes}
        recomputed: list[str] = []
        for q, st in enumerate(result.stages):
            recomp = [v for v in st["nodes"] if st["configs"].get(v, "vanilla") != "vanilla"]
            lines.append(
                f"{q + 1:5d} {len(st['nodes']):6d} {st['data_parallel']:4d} {st['tensor_parallel']:3d} {st['devices']:8d} "
                f"{st['microbatches_in_flight']:5d} {fmt(st['time_per_sample_s'], 10):>16s} {fmt_bytes(st['memory_bytes']):>12s}  "
                f"{len(recomp):10d}  {names_span([names.get(v, v) for v in st['nodes']])}"
            )
            if recomp:
                recomputed.append(f"recomputed stage {q + 1}: {names_span([names.get(v, v) for v in recomp], 90)}")
        lines += recomputed
    return "\n".join(lines)


def step_line(time_per_sample_s: float, bound_s: float | None, microbatches: int) -> str:
    """The step of the global batch: N micro-batches of one sample each at the verified time per sample (Piper's
    steady state: the pipeline's fill and drain are not in it), with the bound's step beside it."""
    bound = f"; bound {fmt(microbatches * bound_s, 8)} s" if bound_s is not None else ""
    return (
        f"step       {fmt(microbatches * time_per_sample_s, 8)} s per global batch of N = {microbatches} samples "
        f"(N x time per sample, steady state{bound})"
    )


def cmd_solve(args: argparse.Namespace) -> int:
    """``solve --problem joint``: the exact DP, baselines, verifier; prints the report, writes the JSON."""
    objective = getattr(args, "objective", None) or "piper"
    if objective not in ("piper", "run"):
        raise InputError(f"{objective} is the pipeline problem's; the joint problem takes piper or run", where="--objective")
    if getattr(args, "kinds", None) is not None:
        if objective == "run":
            raise InputError(
                "a cluster of kinds is planned with Piper's objective only; leave out --objective run", where="--kinds"
            )
        return cmd_solve_mixed(args)
    if getattr(args, "kind_profile", None):
        raise InputError("applies only with --kinds", where="--kind-profile")
    if objective == "run":
        return cmd_solve_run(args)
    for flag in (
        "global_batch", "coefficients", "time_layers", "calibration_launches", "calibration_seconds", "layer_times", "empty_steps",
    ):  # fmt: skip
        if getattr(args, flag, None) not in (None, False):
            instead = "; Piper's objective takes it as --microbatches" if flag == "global_batch" else ""
            raise InputError(f"applies only with --objective run{instead}", where=flag_name(flag))
    problem = problem_from_args(args)
    settings = JointSolveSettings(
        **common_fields(args.common),  # type: ignore[arg-type]
        baselines=not args.no_heuristics,
        max_ideals=getattr(args, "max_ideals", None) or JointSolveSettings().max_ideals,
        method=getattr(args, "method", None) or "dp",
    )
    space = getattr(args, "space", None)
    result = solve_in_space(problem, settings, space) if space else solve_joint(problem, settings)
    code = emit(result, args, lambda: format_report(result, problem))
    if code == EXIT_OK:
        write_export(args, problem, plan_from_json({"stages": result.stages}, "joint") if result.stages else None)
    return code


def read_plan(path: Path) -> JointPlan:
    """A plan from a plan file, a result JSON (its ``stages``) or a bare list of stages (:mod:`milp_partition.io.plans`:
    every field's type is checked; a string of node ids is not a list of them)."""
    plan = read_plan_file(path, "joint")
    assert isinstance(plan, JointPlan)
    return plan


def _positive(value: object) -> float | None:
    """``value`` when it is a finite positive number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def cluster_from_result(args: argparse.Namespace) -> list[str]:
    """Fill the cluster options ``evaluate`` of an imported graph was not given from the result's ``instance``.

    An imported graph carries no cluster: ``--devices``, ``--memory``, ``--bandwidth``, ``--microbatches`` and
    ``--tp-degrees`` are what the plan was solved with, as its result file records them; a flag given on the
    command line wins. A joint file (its own cluster), a bare solution or a malformed figure fills nothing.
    Returns the flags filled.
    """
    if not looks_like_imported(parse_json(read_text_file(args.instance), str(args.instance))):
        return []  # a joint file carries its cluster: the result's own figures are claims to check against it
    claimed = read_result(args.solution)
    instance = claimed.get("instance") if claimed is not None and claimed.get("problem") == "joint" else None
    if not isinstance(instance, dict):
        return []
    filled: list[str] = []
    devices, memory = instance.get("devices"), _positive(instance.get("memory_bytes"))
    if args.devices is None and isinstance(devices, int) and not isinstance(devices, bool) and 1 <= devices <= MAX_DEVICES:
        args.devices = devices
        filled.append(f"--devices {devices}")
    if args.memory is None and memory is not None and memory == int(memory):
        args.memory = f"{int(memory)}B"
        filled.append(f"--memory {fmt_bytes(memory)}")
    bandwidth = _positive(instance.get("bandwidth_bytes_per_s"))
    if args.bandwidth is None and bandwidth is not None:
        args.bandwidth = f"{bandwidth!r}B/s"
        filled.append(f"--bandwidth {format_rate(bandwidth)}")
    n = instance.get("microbatches")
    if getattr(args, "microbatches", None) is None and isinstance(n, int) and not isinstance(n, bool) and n >= 1:
        args.microbatches = n
        filled.append(f"--microbatches {n}")
    degrees = instance.get("degrees")
    if args.tp_degrees is None and isinstance(degrees, list) and degrees:
        if all(isinstance(d, int) and not isinstance(d, bool) for d in degrees):
            args.tp_degrees = ",".join(str(d) for d in degrees)
            filled.append(f"--tp-degrees {args.tp_degrees}")
    return filled


def _listed(values: list[str]) -> str:
    """At most five values, quoted, for a message."""
    return ", ".join(repr(v) for v in values[:5]) + (", ..." if len(values) > 5 else "")


def check_plan(problem: JointProblem, plan: JointPlan, path: Path) -> None:
    """Bad input (exit 2), not an infeasible plan (exit 3): what the plan names must be the instance's, once each, in order.

    Refused: a stage without nodes; an unknown node id; a node in two stages (or twice in one); a node in no stage; a
    ``tensor_parallel`` the node offers no configurations for; a node without a configuration, with one it does not have
    for that degree, or a configuration for a node not in the stage; an edge from a later stage back to an earlier one
    (stages are listed in pipeline order).  What is left to the verifier (exit 3) is what a well-formed plan can break:
    the cluster's devices, ``d`` dividing ``N``, the forced shape, memory.
    """
    source = str(path)
    nodes = {n.id: n for n in problem.nodes}
    stage_of: dict[str, int] = {}
    for q, st in enumerate(plan.stages):
        where = f"stages[{q}]"
        if not st.nodes:
            raise InputError("the stage has no nodes; give it at least one node id or remove it", source=source, where=where)
        for v in st.nodes:
            if v not in nodes:
                raise InputError(
                    f"unknown node id {v!r}; the instance's node ids are {_listed(list(nodes))}", source=source, where=where
                )
            if v in stage_of:
                first = "this stage" if stage_of[v] == q else f"stages[{stage_of[v]}]"
                raise InputError(
                    f"node {v!r} is already in {first}; every node belongs to exactly one stage, list it once",
                    source=source,
                    where=where,
                )
            stage_of[v] = q
            options = nodes[v].configs.get(st.tensor_parallel)
            if not options:
                raise InputError(
                    f"'tensor_parallel' {st.tensor_parallel} is not offered for node {v!r}; use one of its degrees "
                    f"{sorted(nodes[v].configs)}",
                    source=source,
                    where=where,
                )
            name = st.configs.get(v)
            ids = [c.id for c in options]
            if name is None:
                raise InputError(
                    f"'configs' gives no configuration for node {v!r}; add one of {_listed(ids)}", source=source, where=where
                )
            if name not in ids:
                raise InputError(
                    f"'configs': node {v!r} has no configuration {name!r} for tensor_parallel {st.tensor_parallel}; "
                    f"it has {_listed(ids)}",
                    source=source,
                    where=where,
                )
        extra = [v for v in st.configs if v not in st.nodes]
        if extra:
            raise InputError(
                f"'configs' names node {extra[0]!r}, which is not in this stage's 'nodes'; remove it or move the node here",
                source=source,
                where=where,
            )
    missing = [v for v in nodes if v not in stage_of]
    if missing:
        raise InputError(
            f"node {missing[0]!r} is in no stage ({len(missing)} of {len(nodes)} nodes are in none); add every node of "
            "the instance to one stage's 'nodes'",
            source=source,
        )
    for e in problem.edges:
        a, b = stage_of[e.source], stage_of[e.target]
        if a > b:
            raise InputError(
                f"edge {e.source!r} -> {e.target!r} runs from stages[{a}] back to stages[{b}]; stages are listed in "
                "pipeline order (every edge stays in its stage or goes to a later one): reorder the stages or move a node",
                source=source,
            )


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``evaluate --problem joint``: verify a plan, recompute every claim of its result file, print its time per sample and stages.

    Cluster options left out are taken from the result file's ``instance`` (:func:`cluster_from_result`).
    """
    if getattr(args, "kinds", None) is not None:
        return cmd_evaluate_mixed(args)
    if getattr(args, "kind_profile", None):
        raise InputError("applies only with --kinds", where="--kind-profile")
    filled = cluster_from_result(args)
    if filled:
        print(f"note: from {args.solution}'s instance: {' '.join(filled)}", file=sys.stderr)
    problem = problem_from_args(args)
    plan = read_plan(args.solution)
    check_plan(problem, plan, args.solution)
    report = verify_joint(problem, plan)
    if not report.feasible:
        print("INFEASIBLE plan:")
        for line in report.violations:
            print(f"  - {line}")
        return EXIT_INFEASIBLE
    rows = stage_rows(plan, report)
    cl = problem.cluster
    claimed = read_result(args.solution)
    verified_rows: list[dict[str, object]] = []
    if claimed is not None:  # read_plan took its stages: a list of objects, one per row
        # each stage's evaluated figures that the file states (the plan's own fields are what was verified)
        keys = ("time_per_sample_s", "devices", "memory_bytes", "microbatches_in_flight")
        stated = [{k: c[k] for k in keys if k in c} for c in claimed["stages"]]
        verified_rows = [{k: row[k] for k in keys if k in c} for row, c in zip(rows, stated, strict=True)]
        claimed = {**claimed, "stages": stated}
    check_claims(
        claimed,
        args.solution,
        "joint",
        report.objective,
        {
            "stages": verified_rows,
            "time_per_sample": report.objective,
            "peak_memory_bytes": max(st.memory_bytes for st in report.stages),
            "loads": {f"stage {q + 1}": st.time_per_sample_s for q, st in enumerate(report.stages)},
            "memory_bytes": {f"stage {q + 1}": st.memory_bytes for q, st in enumerate(report.stages)},
        },
        {
            "nodes": len(problem.nodes),
            "edges": len(problem.edges),
            "degrees": list(problem.degrees),
            "devices": cl.device_count,
            "memory_bytes": problem.memory_bytes,
            "bandwidth_bytes_per_s": cl.bandwidth_bytes_per_s,
            "microbatches": problem.microbatches,
        },
    )
    print(f"feasible; time_per_sample = {fmt(report.objective, 12)} s on {report.devices} of {cl.device_count} devices")
    for q, st in enumerate(rows):
        print(
            f"  stage {q + 1:3d}: {len(st['nodes']):4d} nodes, d {st['data_parallel']}, t {st['tensor_parallel']}, "
            f"time/sample {fmt(st['time_per_sample_s'], 10)} s, memory {fmt_bytes(st['memory_bytes'])}"
        )
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    """``info`` on a joint file: sizes, degrees, configurations and the file's cluster."""
    data = parse_json(read_text_file(args.instance), str(args.instance))
    cluster = file_cluster(data, str(args.instance))  # checked as solve checks it: a NaN is refused, not printed
    # placeholders so the graph reads without a cluster; the file's own cluster is printed as it is
    problem = read_joint(args.instance, devices=1, memory_bytes=0.0, bandwidth_bytes_per_s=1.0, microbatches=1)
    counts = [sum(len(c) for c in n.configs.values()) for n in problem.nodes]
    print(f"file        {args.instance}")
    print(f"joint       {problem.name or '-'}: {len(problem.nodes)} nodes, {len(problem.edges)} edges (Piper's problem)")
    print(
        f"degrees     tensor-parallel {list(problem.degrees)}; {sum(counts)} configurations ({min(counts)} to {max(counts)} per node)"
    )
    shown = {
        "devices": lambda v: f"{v} devices",
        "memory_bytes": lambda v: f"{fmt_bytes(v)} each",
        "bandwidth_bytes_per_s": lambda v: f"bandwidth {format_rate(v)}",
        "microbatches": lambda v: f"N = {v}",
        "peak_flops_per_s": lambda v: f"peak {v:.4g} FLOP/s per device",
    }
    print("cluster     in the file: " + (", ".join(shown[k](v) for k, v in cluster.items()) or "none"))
    print("solve with  --devices K --memory SIZE --bandwidth RATE [--microbatches N]")
    return EXIT_OK
