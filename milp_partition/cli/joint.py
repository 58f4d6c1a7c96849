"""CLI part of the joint problem (Piper's): ``solve | evaluate | info`` on a Piper or ``milp-partition-joint/1`` file.

:mod:`milp_partition.cli.dispatch` detects the problem (``--problem joint`` or :func:`claims`)
and calls :func:`cmd_solve`, :func:`cmd_evaluate` or :func:`cmd_info`.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from milp_partition.cli import flags
from milp_partition.cli.claims import check_claims, read_result
from milp_partition.cli.joint_run import cmd_solve_run
from milp_partition.cli.options import flag_name, reserved
from milp_partition.cli.output import emit
from milp_partition.errors import InputError
from milp_partition.io.imported_layers import looks_like_imported
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.io.piper import file_cluster, joint_from_dict, looks_like_joint, read_joint
from milp_partition.joint.layers import (
    ALLOWED_TP_DEGREES,
    DEFAULT_MICROBATCHES,
    LayerPlanSettings,
    joint_from_imported,
    parse_tp_degrees,
)
from milp_partition.joint.problem import JointPlan, JointProblem, JointShape, JointSolveSettings, JointStage
from milp_partition.joint.solve import JointResult, solve_joint, stage_rows
from milp_partition.report import fmt, fmt_bytes, gap_text, memory_margin_lines, names_span, run_lines
from milp_partition.units import MAX_DEVICES, format_rate, parse_bytes, parse_rate
from milp_partition.verifiers.joint import verify_joint

EXIT_OK, EXIT_INFEASIBLE = 0, 3

#: Problem options this problem reads (besides those every problem takes).
OPTIONS = frozenset(
    {
        "devices",
        "memory",
        "bandwidth",
        "microbatches",
        "method",
        "tp_degrees",
        "profile",
        "stages",
        "data_parallel",
        "tensor_parallel",
        "max_ideals",
        "memory_reserve",
        "objective",
        "global_batch",
        "coefficients",
        "time_layers",
        "layer_times",
    }
)


def claims(data: object) -> bool:
    """Piper's JSON (nodes with ``TMPCs``) or ``milp-partition-joint/1``."""
    return looks_like_joint(data)


def register_options(parser: argparse.ArgumentParser, command: str = "solve") -> None:
    """Add the joint problem's own options (the cluster's --devices and --memory are shared)."""
    g = parser.add_argument_group("joint problem (Piper's)")
    g.add_argument(
        "--microbatches",
        "--micro-batches",
        dest="microbatches",
        type=flags.count,
        help=f"joint: micro-batches per batch N (default: the file's mbsInBatch; imported graph: {DEFAULT_MICROBATCHES}, "
        "one sample each)",
    )
    g.add_argument(
        "--tp-degrees",
        help="joint, imported graph: tensor-parallel degrees to offer, a maximum (4: 1, 2, 4) or a list (1,2,8) "
        "of 1, 2, 4, 8 (default all up to --devices); --profile gives the device profile (default: the import's); "
        "--bandwidth defaults to the profile's device-to-device link",
    )
    g.add_argument(
        "--stages",
        type=int,
        help="joint: force the number of pipeline stages (the plan is proven optimal within the forced shape)",
    )
    g.add_argument(
        "--data-parallel",
        type=int,
        help="joint: force every stage's data-parallel degree (proven optimal within the forced shape)",
    )
    g.add_argument(
        "--tensor-parallel",
        type=int,
        help="joint: force every stage's tensor-parallel degree (one of --tp-degrees; --tp-degrees 2 alone offers 1 and 2)",
    )
    if command == "solve":
        g.add_argument(
            "--coefficients",
            help="joint, --objective run: a JSON of torch's per-operator costs (forward_overhead_s, backward_overhead_s, "
            "matmul_flops_per_s, memory_s_per_byte; default: measured on this machine when solving); --global-batch "
            "(shared with galvatron) gives the samples per step (default 64), --microbatches N with --data-parallel D "
            "forces N = d m micro-batches",
        )
        g.add_argument(
            "--time-layers",
            action="store_true",
            help="joint, --objective run: time the model's own layers on this CPU at every candidate micro-batch size "
            "(forward, backward and the optimizer step; the model from the import's reference) instead of pricing "
            "operators with --coefficients",
        )
        g.add_argument(
            "--layer-times",
            help="joint, --objective run: reuse the layer times a solve with --time-layers wrote (its result JSON), so "
            "that forced and free plans are priced from one measurement",
        )
        g.add_argument(
            "--method",
            choices=["dp", "milp"],
            help="joint: dp (default) = the exact DP (the wide-graph bounds and the slot MILP only when the graph has "
            "more ideals than the DP's cap or than its compiled passes take); "
            "milp = the slot MILP with --solver (cpsat or cbc), warm-started by the baselines",
        )


def problem_from_args(args: argparse.Namespace) -> JointProblem:
    """Read the instance with the command line's cluster figures over the file's (an imported graph: :func:`imported_problem`)."""
    if getattr(args, "microbatches", None) is not None and args.microbatches < 1:
        raise InputError(f"--microbatches must be a positive integer, got {args.microbatches}")
    if getattr(args, "devices", None) is not None and args.devices < 1:
        raise InputError(f"--devices must be a positive integer, got {args.devices}")
    problem = _problem(args)
    memory = reserved(problem.cluster.memory_bytes, args)  # --memory-reserve stays free of the plan
    assert memory is not None
    return replace(problem, cluster=replace(problem.cluster, memory_bytes=memory), shape=shape_from_args(args))


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
        f"cluster    {cl.devices} devices, {fmt_bytes(cl.memory_bytes)} each, bandwidth {format_rate(cl.bandwidth_bytes_per_s)}, "
        f"N = {cl.microbatches}",
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
    lines += memory_margin_lines(
        {f"stage {q + 1}": st["memory_bytes"] for q, st in enumerate(result.stages)},
        {f"stage {q + 1}": cl.memory_bytes for q in range(len(result.stages))},
    )
    lines.extend(run_lines(result, digits=12))
    if result.stages:
        lines.append("")
        lines.append(
            f"{'stage':>5s} {'nodes':>6s} {'d':>4s} {'t':>3s} {'devices':>8s} {'y':>5s} {'time/sample (s)':>16s} {'memory':>12s}  "
            "recomputed  layers"
        )
        names = {n.id: n.name or n.id for n in problem.nodes}
        for q, st in enumerate(result.stages):
            recomp = sum(1 for c in st["configs"].values() if c != "vanilla")
            lines.append(
                f"{q + 1:5d} {len(st['nodes']):6d} {st['data_parallel']:4d} {st['tensor_parallel']:3d} {st['devices']:8d} "
                f"{st['microbatches_in_flight']:5d} {fmt(st['time_per_sample_s'], 10):>16s} {fmt_bytes(st['memory_bytes']):>12s}  "
                f"{recomp:10d}  {names_span([names.get(v, v) for v in st['nodes']])}"
            )
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    """``solve --problem joint``: the exact DP, baselines, verifier; prints the report, writes the JSON."""
    objective = getattr(args, "objective", None) or "piper"
    if objective not in ("piper", "run"):
        raise InputError(f"{objective} is the pipeline problem's; the joint problem takes piper or run", where="--objective")
    if objective == "run":
        return cmd_solve_run(args)
    for flag in ("global_batch", "coefficients", "time_layers", "layer_times"):
        if getattr(args, flag, None) not in (None, False):
            raise InputError("applies only with --objective run", where=flag_name(flag))
    problem = problem_from_args(args)
    settings = JointSolveSettings(
        time_limit_s=args.time_limit,
        threads=args.threads,
        baselines=not args.no_heuristics,
        max_ideals=getattr(args, "max_ideals", None) or JointSolveSettings().max_ideals,
        progress_interval_s=None if (args.quiet or args.progress <= 0) else args.progress,
        method=getattr(args, "method", None) or "dp",
        solver=args.solver,
    )
    result = solve_joint(problem, settings)
    return emit(result, args, lambda: format_report(result, problem))


def read_plan(path: Path) -> JointPlan:
    """A plan from a result JSON (its ``stages``) or a bare list of stages; every field's type is checked (a string of
    node ids is not a list of them)."""
    source = str(path)
    data = parse_json(read_text_file(path), source)
    if isinstance(data, dict):
        data = data.get("stages")
    if not isinstance(data, list) or not data:
        raise InputError("expected a result JSON with a non-empty 'stages' list, or such a list", source=source)
    stages = []
    for q, st in enumerate(data):
        where = f"stages[{q}]"
        if not isinstance(st, dict):
            raise InputError("expected an object", source=source, where=where)
        nodes, d, t, configs = st.get("nodes"), st.get("data_parallel"), st.get("tensor_parallel"), st.get("configs")
        if not isinstance(nodes, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in nodes):
            raise InputError(f"'nodes' must be a list of node ids, got {_short(nodes)}", source=source, where=where)
        for key, value in (("data_parallel", d), ("tensor_parallel", t)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEVICES:
                raise InputError(
                    f"'{key}' must be an integer from 1 to {MAX_DEVICES}, got {_short(value)}", source=source, where=where
                )
        if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
            raise InputError(
                f"'configs' must be an object mapping node id to configuration id, got {_short(configs)}",
                source=source,
                where=where,
            )
        assert isinstance(d, int) and isinstance(t, int)  # checked above
        stages.append(JointStage(tuple(str(v) for v in nodes), d, t, {str(k): v for k, v in configs.items()}))
    return JointPlan(tuple(stages))


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``evaluate --problem joint``: verify a plan, recompute every claim of its result file, print its time per sample and stages."""
    problem = problem_from_args(args)
    plan = read_plan(args.solution)
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
            "devices": cl.devices,
            "memory_bytes": cl.memory_bytes,
            "bandwidth_bytes_per_s": cl.bandwidth_bytes_per_s,
            "microbatches": cl.microbatches,
        },
    )
    print(f"feasible; time_per_sample = {fmt(report.objective, 12)} s on {report.devices} of {cl.devices} devices")
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
    }
    print("cluster     in the file: " + (", ".join(shown[k](v) for k, v in cluster.items()) or "none"))
    print("solve with  --devices K --memory SIZE --bandwidth RATE [--microbatches N]")
    return EXIT_OK
