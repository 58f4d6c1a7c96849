"""The pipeline problem behind ``milp-partition solve | evaluate | info`` (the default for graph files).

The dispatcher (:mod:`milp_partition.cli.dispatch`) calls ``register_options`` of :mod:`milp_partition.cli.pipeline_options`
when it builds the parser and :func:`cmd_solve`, :func:`cmd_evaluate` or
:func:`cmd_info` with the parsed arguments.  Bad input raises
:class:`~milp_partition.errors.InputError`, printed on one line with exit 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, cast

from milp_partition.budget import Budget
from milp_partition.calibration.apply import apply_profile
from milp_partition.calibration.profile import resolve_profile
from milp_partition.cli.claims import check_claims, read_result
from milp_partition.cli.exit_codes import EXIT_INFEASIBLE, EXIT_OK
from milp_partition.cli.options import DEFAULT_MEMORY_MODEL, reserved
from milp_partition.cli.output import emit
from milp_partition.cli.pipeline_options import DEFAULT_MAX_IDEALS, MEMORY_MODELS
from milp_partition.cluster import Cluster, Link, homogeneous_cluster, make_cluster
from milp_partition.costmodel.messages import per_sample
from milp_partition.errors import InputError
from milp_partition.graph import TIME_UNIT_SECONDS, Graph, make_graph
from milp_partition.io import read_cluster, read_instance
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.io.native import cluster_from_dict
from milp_partition.io.plans import read_plan
from milp_partition.joint.layers import DEFAULT_PROFILE
from milp_partition.pipeline.problem import Instance, PipelineProblem, PipelineSettings, PipelineSolution, default_memory_model
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
from milp_partition.report import device_counts, gap_text, memory_margin_lines, names_span, node_label, run_lines, unit_label
from milp_partition.report import fmt as _fmt
from milp_partition.report import fmt_bytes as _fmt_bytes
from milp_partition.result import Result
from milp_partition.settings import common_fields
from milp_partition.strategy.problem import StrategySolution
from milp_partition.units import format_rate, parse_bytes, parse_rate
from milp_partition.verifiers.pipeline import verify_pipeline


def check_options(args: argparse.Namespace) -> None:
    """Refuse option values that do not fit the pipeline problem."""
    if (args.memory_model or DEFAULT_MEMORY_MODEL) not in MEMORY_MODELS:
        raise InputError(
            f"{args.memory_model} does not apply to the pipeline problem; use static or 1f1b",
            where="--memory-model",
        )
    if (args.objective or "time") not in ("time", "memory"):
        raise InputError(
            f"{args.objective} applies to the joint (piper, run) or hetero (sailor, sound) problem; the pipeline takes time or memory",
            where="--objective",
        )
    if args.max_time_per_sample is not None and (args.objective or "time") != "memory":
        raise InputError("applies only with --objective memory", where="--max-time-per-sample")


def cluster_from_args(args: argparse.Namespace, instance: Instance) -> Cluster:
    """The instance's cluster, or ``--cluster``, with the command line's overrides."""

    recorded = getattr(args, "cluster_from_result", None)
    if args.cluster is not None:
        base = read_cluster(args.cluster)
    elif recorded is not None:  # evaluate: the cluster the result was solved for
        base = recorded
    elif instance.cluster is not None:
        base = instance.cluster
    elif args.devices is None:
        raise InputError(
            "this instance carries no cluster; give --devices N (and --memory SIZE, link figures) or --cluster FILE",
            source=str(args.instance),
        )
    else:
        base = None
    link = base.link if base is not None else Link()
    # no cluster given: the profile's device-to-device link; an imported graph's is the one its import was priced
    # with, as the joint problem takes it (one price for one plan: milp_partition.costmodel.messages)
    given = getattr(args, "profile", None)
    spec = given or (imported_profile(args.instance) if base is None else None)
    peak_flops: float | None = None  # an imported graph's devices: the profile's peak for the import's dtype
    if base is None and spec:
        try:
            profile = resolve_profile(spec)
            d2d = profile.links["d2d"]
        except InputError as why:
            if given:
                raise
            raise InputError(
                f"the profile the graph was imported with, {spec!r}, is not readable ({why}); give --profile or a link "
                "(--bandwidth, --link-latency, --cluster)",
                source=str(args.instance),
                where="layers.profile",
            ) from None
        link = Link(latency_s=d2d.alpha_s, bandwidth_bytes_per_s=d2d.bandwidth_bytes_per_s)
        layers = _layers(args.instance)
        rate = profile.compute.get(str(layers.get("dtype", "float32"))) if layers is not None else None
        peak_flops = None if rate is None else rate.peak_flop_per_s
    if args.link_latency is not None or args.bandwidth is not None:
        link = Link(
            latency_s=args.link_latency if args.link_latency is not None else link.latency_s,
            bandwidth_bytes_per_s=parse_rate(args.bandwidth, "--bandwidth") if args.bandwidth else link.bandwidth_bytes_per_s,
        )
    cores = args.cpu_cores if args.cpu_cores is not None else (base.host_cpu_cores if base is not None else 0)
    if args.devices is not None or args.memory is not None or base is None:
        count = args.devices if args.devices is not None else len(base.devices)  # type: ignore[union-attr]
        memory = (
            parse_bytes(args.memory, "--memory")
            if args.memory is not None
            else (base.devices[0].memory_bytes if base is not None and base.devices else None)
        )
        kind = base.devices[0].kind if base is not None and base.devices else "gpu"
        return homogeneous_cluster(
            count, reserved(memory, args), kind=kind, host_cpu_cores=cores, link=link, source="command line"
        ).with_peak_flops(peak_flops)
    devices = [replace(d, memory_bytes=reserved(d.memory_bytes, args)) for d in base.devices]  # --memory-reserve stays free
    return make_cluster(devices, host_cpu_cores=cores, link=link, source="command line")


def problem_from_args(args: argparse.Namespace) -> PipelineProblem:
    """Read the instance under the command line's settings."""

    check_options(args)
    instance = read_instance(args.instance)
    graph = instance.graph
    if not graph.nodes:
        raise InputError("the graph has no nodes: nothing to partition", source=str(args.instance))
    if getattr(args, "profile", None):  # calibration: nodes without measured times get times from FLOPs and bytes
        graph, applied = apply_profile(graph, resolve_profile(args.profile), source=str(args.instance))
        if not applied.filled:
            why = (
                "every node has a measured time, which the profile keeps"
                if not applied.no_flops
                else "no node without a measured time carries FLOPs"
            )
            note = f"--profile {args.profile} changes no node time here: {why}"
            if args.cluster is None and instance.cluster is None:
                note += " (its link is still used, as the instance has no cluster)"
            print(f"milp-partition: note: {note}", file=sys.stderr)
    graph = priced_by_link(graph, args)
    batch = imported_batch_size(args.instance)
    settings = PipelineSettings(
        contiguous=not args.no_contiguous,
        objective=args.objective or "time",
        max_time_per_sample=args.max_time_per_sample,
        memory_model=cast(Literal["static", "1f1b"], args.memory_model or default_memory_model(graph)),
        optimizer_state_factor=1.0 if args.optimizer_factor is None else args.optimizer_factor,
        messages="per_edge" if batch is not None else "per_source",
    )
    return PipelineProblem(
        graph, cluster_from_args(args, instance), settings, source=str(args.instance), samples_per_microbatch=batch
    )


def _layers(path: str | Path) -> dict[str, Any] | None:
    """The ``layers`` object of a graph written by ``milp-partition import``; ``None`` for any other file."""
    try:
        data = parse_json(read_text_file(path), str(path))
    except InputError:
        return None
    layers = data.get("layers") if isinstance(data, dict) and data.get("format") == "milp-partition/1" else None
    return layers if isinstance(layers, dict) else None


def imported_profile(path: str | Path) -> str | None:
    """The device profile an imported graph's times and links come from, as the joint problem resolves it
    (:mod:`milp_partition.joint.layers`: the file's ``layers.profile``, else the H100 datasheet); ``None`` for a
    graph that was not imported."""
    layers = _layers(path)
    if layers is None:
        return None
    profile = layers.get("profile")
    return str(profile) if profile else DEFAULT_PROFILE


def imported_batch_size(path: str | Path) -> int | None:
    """The samples of one pass of a graph written by ``milp-partition import`` (its ``layers.batch_size``); ``None``
    for any other file (no ``layers`` object).  Such a graph is priced per edge (``messages="per_edge"``), as the
    joint problem prices it (:mod:`milp_partition.costmodel.messages`)."""
    layers = _layers(path)
    if layers is None:
        return None
    batch = layers.get("batch_size")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(
            f"must be a positive whole number of samples, got {batch!r}", source=str(path), where="layers.batch_size"
        )
    return batch


def per_sample_line(value: float, problem: PipelineProblem) -> list[str]:
    """The time per sample in seconds, the joint problem's unit (an imported graph: its times are per micro-batch of
    ``samples_per_microbatch`` samples, in the graph's unit)."""
    batch, unit = problem.samples_per_microbatch, TIME_UNIT_SECONDS.get(problem.graph.time_unit)
    if batch is None or unit is None:
        return []
    samples = f"{batch} sample{'s' if batch != 1 else ''}"
    return [
        f"sample     {_fmt(per_sample(value * unit, batch))} s a sample ({_fmt(value)} {problem.graph.time_unit} a micro-batch of {samples})"
    ]


def priced_by_link(graph: Graph, args: argparse.Namespace) -> Graph:
    """The graph with its edges priced from their bytes and the cluster's link when the command line sets the link.

    An imported graph carries each edge's transfer time as priced at import (the profile's link); a link given
    with ``--bandwidth``, ``--link-latency`` or ``--cluster`` must change them, or the report would print one rate
    and the plan be priced at another (issue 43 item 3).  So those edges lose their ``transfer_time`` and are priced
    at solve time (latency + bytes / bandwidth, :mod:`milp_partition.pipeline.costs`).  An edge with a transfer
    time but no bytes cannot be priced by a link: the flag is refused.
    """
    given = [
        f
        for f, dest in (("--bandwidth", "bandwidth"), ("--link-latency", "link_latency"), ("--cluster", "cluster"))
        if getattr(args, dest, None) is not None
    ]
    if getattr(args, "transfers_from_result", None) == "link":  # evaluate: the result was priced by its link
        given.append(f"{args.solution}'s instance.cluster")
    if not given or all(e.transfer_time is None for e in graph.edges):
        return graph
    unpriceable = next((e for e in graph.edges if e.transfer_time is not None and e.transfer_time > 0 and e.bytes <= 0), None)
    if unpriceable is not None:
        raise InputError(
            f"edge {unpriceable.source!r} -> {unpriceable.target!r} has a transfer time but no bytes, so a link cannot "
            f"price it; leave out {' and '.join(given)} (the file's transfer times stand) or give the edges' bytes",
            source=str(args.instance),
            where=given[0],
        )
    edges = [replace(e, transfer_time=None) if e.transfer_time is not None else e for e in graph.edges]
    return make_graph(graph.nodes, edges, name=graph.name, time_unit=graph.time_unit, source=str(args.instance))


def _cores(n: int) -> str:
    return f"{n} CPU core" + ("" if n == 1 else "s")


def _capacity(problem: PipelineProblem) -> str:
    """The cluster's capacity: memory per accelerator and the link (every report shows what it planned for)."""
    sizes = [d.memory_bytes for d in problem.cluster.devices]
    if len(set(sizes)) == 1:
        memory = "unbounded memory" if sizes[0] is None else f"{_fmt_bytes(sizes[0])} each"
    else:
        memory = "memory " + ", ".join(
            f"{d.id} {'-' if d.memory_bytes is None else _fmt_bytes(d.memory_bytes)}" for d in problem.cluster.devices
        )
    link = problem.cluster.link
    rate = "unbounded" if math.isinf(link.bandwidth_bytes_per_s) else format_rate(link.bandwidth_bytes_per_s)
    return f"{len(sizes)} accelerators, {memory}; link {rate}, latency {_fmt(link.latency_s)} s"


def _memory_model_lines(problem: PipelineProblem) -> list[str]:
    """What the memory model counts, and for a training graph under ``static`` that it keeps no micro-batches in flight."""
    s = problem.settings
    if s.memory_model == "1f1b":
        return [
            f"memory     1f1b: stage i of {len(problem.cluster.devices)} keeps s - i micro-batches of activations, "
            f"parameters x {_fmt(s.optimizer_state_factor)}, other bytes"
        ]
    lines = ["memory     static: parameters + one copy of the activations + other bytes per device"]
    if any(n.is_backward for n in problem.graph.nodes):
        lines.append(
            "note       a training graph: the static model counts no micro-batches in flight, so its memory per device is "
            "below what a 1F1B schedule or the joint planner (solve --problem joint) charges for the same stages"
        )
    return lines


def format_report(result: Result, problem: PipelineProblem) -> str:
    """A readable report of a pipeline result."""
    known = result.time_unit not in ("", "unitless")
    unit = unit_label(result.time_unit)
    lines = [
        f"instance   {problem.source}  ({len(problem.graph.nodes)} nodes, {len(problem.graph.edges)} edges, "
        f"{len(problem.cluster.devices)} accelerators, {_cores(problem.cluster.host_cpu_cores)})",
        f"problem    pipeline, {'contiguous' if problem.settings.contiguous else 'non-contiguous'}, objective {problem.settings.objective}, "
        f"memory model {problem.settings.memory_model}",
        f"cluster    {_capacity(problem)}",
        *_memory_model_lines(problem),
        f"status     {result.status.upper()}" + (f"  ({result.message})" if result.message else ""),
    ]
    if result.objective is not None:
        obj = _fmt(result.objective) + (f" {unit}" if result.objective_name == "time_per_sample" else " bytes")
        lines.append(f"objective  {result.objective_name} = {obj}   (verified)")
        if result.objective_name == "time_per_sample":
            lines += per_sample_line(result.objective, problem)
        lines.append(f"bound      {_fmt(result.bound)}   gap {gap_text(result.gap)}")
    if not known:
        lines.append("units      the file gives no time unit: times are carried as given (unit unknown)")
    if result.objective is not None:
        limits = {d.id: d.memory_bytes for d in problem.cluster.devices}
        lines += memory_margin_lines({k: v for k, v in result.memory_bytes.items() if k in limits}, limits)
    lines.extend(run_lines(result))
    if result.assignment:
        counts = device_counts(result, problem.device_ids)
        lines.append("")
        training = any(n.is_backward for n in problem.graph.nodes)
        # a training graph: the count is of forward and backward nodes, the names of the forward ones (BERT-24 said
        # "gpu0 16 nodes" beside 8 names)
        names_head = "forward nodes (graph order; their backward nodes with them)" if training else "names (graph order)"
        names_head += "; [id] where the result's key is not the name"
        lines.append(
            f"{'device':10s} {'fw+bw' if training else 'nodes':>6s} {'load (' + unit + ')':>18s} {'memory':>12s}  {names_head}"
        )
        on: dict[str, list[str]] = {}
        for n in problem.graph.nodes:  # forward nodes: a device's backward nodes mirror them
            if not n.is_backward and n.id in result.assignment:
                on.setdefault(result.assignment[n.id], []).append(node_label(n.id, n.name))
        for dev in problem.device_ids:
            lines.append(
                f"{dev:10s} {counts.get(dev, 0):6d} {_fmt(result.loads.get(dev, 0.0)):>18s} "
                f"{_fmt_bytes(result.memory_bytes.get(dev)) if dev in result.memory_bytes else '-':>12s}  "
                f"{names_span(on.get(dev, []))}"
            )
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    """``solve`` for a pipeline instance (the time limit counts from before the instance is read)."""

    budget = Budget.starting_now(args.common.time_limit_s)
    problem = problem_from_args(args)
    settings = SolveSettings(
        **common_fields(args.common),  # type: ignore[arg-type]
        heuristics=not args.no_heuristics,
        max_ideals=args.max_ideals or DEFAULT_MAX_IDEALS,
    )
    result = solve_pipeline(problem, settings, budget)
    if result.status == "infeasible" and problem.settings.objective == "memory":
        result.message += _least_time_note(problem, settings)
    return emit(result, args, lambda: format_report(result, problem))


def _least_time_note(problem: PipelineProblem, settings: SolveSettings) -> str:
    """When ``--max-time-per-sample`` makes the memory objective infeasible: the least time per sample there is."""
    from dataclasses import replace

    timed = PipelineProblem(
        problem.graph,
        problem.cluster,
        replace(problem.settings, objective="time", max_time_per_sample=None),
        source=problem.source,
    )
    least = solve_pipeline(timed, replace(settings, progress_interval_s=None))
    unit = unit_label(problem.graph.time_unit)
    if least.status == "optimal":
        return f"; the least time per sample these settings allow is {_fmt(least.objective)} {unit} (proven): raise --max-time-per-sample to at least that"
    if least.status == "feasible":
        return (
            f"; the least time per sample these settings allow is between {_fmt(least.bound)} and {_fmt(least.objective)} "
            f"{unit} (time limit): raise --max-time-per-sample"
        )
    if least.status == "infeasible":
        return "; no assignment fits memory even without the time bound"
    return ""


def read_assignment(path: Path, kind: str = "pipeline") -> dict[str, str]:
    """A plan file's or result JSON's ``assignment``, or an object id -> device id (pipeline) or configuration id
    (``kind`` "strategy") (:mod:`milp_partition.io.plans`); anything else is bad input."""
    plan = read_plan(path, kind)
    if isinstance(plan, StrategySolution):
        return dict(plan.choice)
    assert isinstance(plan, PipelineSolution)
    return dict(plan.assignment)


def check_assignment(assignment: dict[str, str], ids: list[str], devices: list[str], path: Path, what: str) -> None:
    """Bad input (exit 2), not an infeasible solution: an unknown id, an unknown device, an id without a device."""
    known, devs = set(ids), set(devices)
    for key, dev in assignment.items():
        if key not in known:
            raise InputError(f"unknown {what} id {key!r} in the solution", source=str(path))
        if dev not in devs:
            raise InputError(
                f"unknown device {dev!r}; devices are {', '.join(devices)}", source=str(path), where=f"{what} {key!r}"
            )
    missing = [i for i in ids if i not in assignment]
    if missing:
        raise InputError(f"the solution gives no device for this {what}", source=str(path), where=f"{what} {missing[0]!r}")


def _recorded_cluster(args: argparse.Namespace) -> Cluster | None:
    """The cluster a result records (``instance.cluster``) when the command line gives none (no ``--cluster``,
    ``--devices`` or ``--memory``): a plan solved on an imported graph is evaluated as it was solved, without the
    flags again (issue 43 item 15).  A malformed record is bad input naming the file."""
    if args.cluster is not None or args.devices is not None or args.memory is not None:
        return None
    data = read_result(args.solution)
    inst = data.get("instance") if isinstance(data, dict) else None
    if not isinstance(inst, Mapping) or inst.get("cluster") is None:
        return None
    return cluster_from_dict(inst["cluster"], f"{args.solution} (instance.cluster)")


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``evaluate`` for a pipeline instance: verify an assignment and print its objective; the cluster is the
    command line's, else the one the result records, else the instance's."""

    recorded = _recorded_cluster(args)
    if recorded is not None:
        args.cluster_from_result = recorded
        args.transfers_from_result = (read_result(args.solution) or {}).get("instance", {}).get("transfers")
        print(f"cluster     from {args.solution} (instance.cluster: the cluster it was solved for)")
    problem = problem_from_args(args)
    assignment = read_assignment(args.solution)
    check_assignment(assignment, [n.id for n in problem.graph.nodes], list(problem.device_ids), args.solution, "node")
    report = verify_pipeline(problem, PipelineSolution(assignment))
    if not report.feasible:
        print("INFEASIBLE solution:")
        for line in report.violations:
            print(f"  - {line}")
        return EXIT_INFEASIBLE
    check_claims(
        read_result(args.solution),
        args.solution,
        "pipeline",
        report.objective,
        {
            "time_per_sample": report.time_per_sample,
            "peak_memory_bytes": report.peak_memory_bytes,
            "loads": report.loads,
            "memory_bytes": report.memory_bytes,
        },
        {"nodes": len(problem.graph.nodes), "edges": len(problem.graph.edges), "devices": list(problem.device_ids)},
    )
    print(
        f"feasible; time_per_sample = {_fmt(report.time_per_sample)} {unit_label(problem.graph.time_unit)}; "
        f"peak memory = {_fmt_bytes(report.peak_memory_bytes)}; objective ({problem.settings.objective}) = {_fmt(report.objective)}"
    )
    for dev in problem.device_ids:
        print(
            f"  {dev:10s} load {_fmt(report.loads.get(dev, 0.0)):>16s}  memory {_fmt_bytes(report.memory_bytes.get(dev)) if dev in report.memory_bytes else '-'}"
        )
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    """``info`` for a pipeline instance: sizes, work, memory, cluster."""

    inst = read_instance(args.instance)
    g = inst.graph
    fwd = sum(1 for n in g.nodes if not n.is_backward)
    groups = {n.colocation_group for n in g.nodes if n.colocation_group is not None}
    print(f"file        {args.instance}")
    print(
        f"graph       {g.name or '-'}: {len(g.nodes)} nodes ({fwd} forward, {len(g.nodes) - fwd} backward), {len(g.edges)} edges, "
        f"{len(groups)} colocation groups, time unit "
        + (g.time_unit if g.time_unit != "unitless" else "unknown (not in the file; times are carried as given)")
    )
    print(
        f"work        forward {_fmt(sum(n.forward_time for n in g.nodes))}, backward {_fmt(sum(n.backward_time for n in g.nodes))}"
    )
    print(
        f"memory      params {_fmt_bytes(sum(n.param_bytes for n in g.nodes))}, activations {_fmt_bytes(sum(n.activation_bytes for n in g.nodes))}, "
        f"other {_fmt_bytes(sum(n.other_bytes for n in g.nodes))}"
    )
    if inst.cluster is None:
        print("cluster     none in the file (give --devices/--memory or --cluster when solving)")
    else:
        c = inst.cluster
        mems = {d.memory_bytes for d in c.devices}
        print(
            f"cluster     {len(c.devices)} accelerators ({', '.join(sorted({d.kind for d in c.devices}))}; memory "
            f"{', '.join(_fmt_bytes(m) if m is not None else 'unbounded' for m in mems)}), {_cores(c.host_cpu_cores)}"
        )
    return EXIT_OK


def claims(data: object) -> bool:
    """The pipeline problem is the fallback: it takes every graph format the other problems do not claim."""
    return True
