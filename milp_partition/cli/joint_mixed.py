"""CLI part of the joint problem on a cluster of kinds: ``solve GRAPH --problem joint --kinds H100:8,A100:16``.

:func:`milp_partition.cli.joint.cmd_solve` hands over here when ``--kinds`` is given.  The graph must be one
written by ``milp-partition import``; each kind's configurations are priced with its profile
(:mod:`milp_partition.joint.mixed_layers`), the exact DP proves the plan (:mod:`milp_partition.joint.mixed_solve`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from milp_partition.cli.claims import check_claims, read_result
from milp_partition.cli.options import flag_name
from milp_partition.cli.output import emit
from milp_partition.errors import InputError
from milp_partition.io.imported_layers import looks_like_imported
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.joint.layers import ALLOWED_TP_DEGREES, DEFAULT_MICROBATCHES, parse_tp_degrees
from milp_partition.joint.mixed_layers import mixed_from_imported, parse_kind_profiles, parse_kinds
from milp_partition.joint.mixed_problem import MixedJointProblem, MixedPlan, MixedStage
from milp_partition.joint.mixed_solve import MixedJointResult, MixedSolveSettings, solve_mixed
from milp_partition.report import fmt, fmt_bytes, gap_text, names_span, run_lines
from milp_partition.settings import common_fields
from milp_partition.units import format_rate, parse_rate
from milp_partition.verifiers.joint_mixed import verify_joint_mixed

EXIT_OK, EXIT_INFEASIBLE = 0, 3

#: Flags of the homogeneous joint solve that a cluster of kinds replaces or does not take.
REFUSED = (
    ("devices", "the kinds give the counts (KIND:COUNT)"),
    ("memory", "the kinds give the memory (KIND:COUNT:MEMORY; default the datasheet's)"),
    ("profile", "each kind is priced with its own profile (--kind-profile KIND=FILE)"),
    ("memory_reserve", "give each kind's usable memory in --kinds"),
    ("stages", "a forced shape is not offered with --kinds"),
    ("data_parallel", "a forced shape is not offered with --kinds"),
    ("tensor_parallel", "a forced shape is not offered with --kinds (offer degrees with --tp-degrees)"),
    ("space", "the engines' spaces are homogeneous"),
    ("export", "the exporters write homogeneous plans"),
    ("method", "the cluster of kinds is solved by its exact DP"),
    ("max_ideals", "the cluster of kinds' DP has its own cap"),
    ("global_batch", "Piper's objective takes the batch as --microbatches"),
    ("coefficients", "only with --objective run, which --kinds does not take"),
    ("time_layers", "only with --objective run, which --kinds does not take"),
    ("calibration_launches", "only with --objective run, which --kinds does not take"),
    ("calibration_seconds", "only with --objective run, which --kinds does not take"),
    ("layer_times", "only with --objective run, which --kinds does not take"),
    ("empty_steps", "only with --objective run, which --kinds does not take"),
)


def mixed_problem_from_args(args: argparse.Namespace) -> MixedJointProblem:
    """The mixed joint problem of ``args.instance`` with ``--kinds`` and the shared joint flags."""
    for flag, why in REFUSED:
        if getattr(args, flag, None) not in (None, False):
            raise InputError(f"not with --kinds: {why}", where=flag_name(flag))
    source = str(args.instance)
    data = parse_json(read_text_file(args.instance), source)
    if not looks_like_imported(data):
        raise InputError(
            "--kinds plans a graph written by 'milp-partition import' (with its 'layers' object); import the model first",
            source=source,
            where="--kinds",
        )
    specs = parse_kinds(args.kinds)
    return mixed_from_imported(
        data,
        source,
        specs,
        kind_profiles=parse_kind_profiles(getattr(args, "kind_profile", None), specs),
        bandwidth_bytes_per_s=parse_rate(str(args.bandwidth), "--bandwidth") if getattr(args, "bandwidth", None) else None,
        microbatches=args.microbatches if getattr(args, "microbatches", None) is not None else DEFAULT_MICROBATCHES,
        tp_degrees=parse_tp_degrees(args.tp_degrees) if getattr(args, "tp_degrees", None) is not None else ALLOWED_TP_DEGREES,
    )


def format_mixed_report(result: MixedJointResult, problem: MixedJointProblem) -> str:
    """Status, objective, bound, the step of the global batch and the plan (stage -> kind, d, t, layers, memory)."""
    N = problem.microbatches
    kinds = ", ".join(
        f"{k.count} x {k.name} ({fmt_bytes(k.memory_bytes)}, {k.devices_per_node} per node, {format_rate(k.bandwidth_bytes_per_s)}, "
        f"t in {list(problem.degrees(k.name))}, profile {k.profile})"
        for k in problem.kinds
    )
    lines = [
        f"instance   {problem.source}  ({len(problem.graph.nodes)} nodes, {len(problem.graph.edges)} edges)",
        f"cluster    {kinds}; N = {N}",
        "problem    joint on a cluster of kinds (each stage's kind, data- and tensor-parallel degree, recomputation)",
        *(f"note       {n}" for n in problem.notes),
        f"status     {result.status.upper()}" + (f"  ({result.message})" if result.message else ""),
    ]
    if result.objective is not None:
        lines.append(f"objective  time_per_sample = {fmt(result.objective, 12)} s   (verified)")
        lines.append(f"bound      {fmt(result.bound, 12)}   gap {gap_text(result.gap)}")
        bound = f"; bound {fmt(result.step_bound_s, 8)} s" if result.step_bound_s is not None else ""
        lines.append(
            f"step       {fmt(result.step_s, 8)} s per global batch of N = {N} samples (N x time per sample, steady state{bound})"
        )
    elif result.bound is not None:
        lines.append(f"bound      {fmt(result.bound, 12)}")
    lines.extend(run_lines(result, digits=12))
    if result.stages:
        names = {n.id: n.name or n.id for n in problem.graph.nodes}
        lines.append("")
        lines.append(
            f"{'stage':>5s} {'kind':>8s} {'d':>4s} {'t':>3s} {'devices':>8s} {'y':>4s} {'time/sample (s)':>16s} "
            f"{'mem/device':>12s} {'of':>10s}  recomputed  layers"
        )
        for q, st in enumerate(result.stages):
            recomp = [v for v in st["nodes"] if st["configs"].get(v, "vanilla") != "vanilla"]
            lines.append(
                f"{q + 1:5d} {st['kind']:>8s} {st['data_parallel']:4d} {st['tensor_parallel']:3d} {st['devices']:8d} "
                f"{st['microbatches_in_flight']:4d} {fmt(st['time_per_sample_s'], 10):>16s} {fmt_bytes(st['memory_bytes']):>12s} "
                f"{fmt_bytes(st['memory_limit_bytes']):>10s}  {len(recomp):10d}  {names_span([names.get(v, v) for v in st['nodes']])}"
            )
        used = {k.name: 0 for k in problem.kinds}
        for st in result.stages:
            used[st["kind"]] += st["devices"]
        lines.append("devices    " + ", ".join(f"{k.name} {used[k.name]} of {k.count}" for k in problem.kinds))
    return "\n".join(lines)


def cmd_solve_mixed(args: argparse.Namespace) -> int:
    """``solve --problem joint --kinds ...``: the exact DP and the verifier; prints the report, writes the JSON."""
    problem = mixed_problem_from_args(args)
    common = {**common_fields(args.common), "solver": "none"}  # no back-end runs: the exact DP proves
    settings = MixedSolveSettings(**common, heuristics=not args.no_heuristics)  # type: ignore[arg-type]
    result = solve_mixed(problem, settings)
    return emit(result, args, lambda: format_mixed_report(result, problem))


def read_mixed_plan(path: Path) -> MixedPlan:
    """The plan of a result file written by ``solve --kinds`` (its ``stages``, each with its ``kind``), every field checked."""
    data = read_result(path)
    stages = data.get("stages") if data is not None else None
    if not isinstance(stages, list) or not stages:
        raise InputError("no 'stages' list: give the result file of 'solve --problem joint --kinds ...'", source=str(path))
    out = []
    for q, st in enumerate(stages):
        where = f"stages[{q}]"
        if not isinstance(st, dict):
            raise InputError("not an object", source=str(path), where=where)
        nodes, configs = st.get("nodes"), st.get("configs", {})
        if not isinstance(nodes, list) or not all(isinstance(v, str) for v in nodes):
            raise InputError("'nodes' must be a list of node ids", source=str(path), where=where)
        if not isinstance(st.get("kind"), str):
            raise InputError("'kind' must be the name of a kind (a plan of 'solve --kinds')", source=str(path), where=where)
        for field in ("data_parallel", "tensor_parallel"):
            value: Any = st.get(field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"'{field}' must be a whole number", source=str(path), where=where)
        if not isinstance(configs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in configs.items()):
            raise InputError("'configs' must map node ids to configuration ids", source=str(path), where=where)
        out.append(MixedStage(tuple(nodes), st["kind"], st["data_parallel"], st["tensor_parallel"], dict(configs)))
    return MixedPlan(tuple(out))


def cmd_evaluate_mixed(args: argparse.Namespace) -> int:
    """``evaluate GRAPH RESULT --problem joint --kinds ...``: verify the plan on the kinds, check the file's claims."""
    problem = mixed_problem_from_args(args)
    path = Path(args.solution)
    plan = read_mixed_plan(path)
    report = verify_joint_mixed(problem, plan)
    if not report.feasible:
        print("INFEASIBLE plan:")
        for line in report.violations:
            print(f"  - {line}")
        return EXIT_INFEASIBLE
    N = problem.microbatches
    check_claims(
        read_result(path),
        path,
        "joint",
        report.objective,
        {
            "time_per_sample": report.objective,
            "step_s": N * report.objective,
            "peak_memory_bytes": max(st.memory_bytes for st in report.stages),
        },
    )
    used = ", ".join(f"{k.name} {report.devices[k.name]} of {k.count}" for k in problem.kinds)
    print(f"feasible; time_per_sample = {fmt(report.objective, 12)} s ({used})")
    for q, st in enumerate(report.stages):
        print(
            f"  stage {q + 1:3d}: {st.kind}, {len(plan.stages[q].nodes):4d} nodes, d {plan.stages[q].data_parallel}, "
            f"t {plan.stages[q].tensor_parallel}, time/sample {fmt(st.time_per_sample_s, 10)} s, memory {fmt_bytes(st.memory_bytes)}"
        )
    return EXIT_OK
