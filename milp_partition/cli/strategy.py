"""The strategy problem behind ``milp-partition solve | evaluate | info`` (strategy-tables and strategy-layers files).

The dispatcher (:mod:`milp_partition.cli.dispatch`) calls ``register_options`` of :mod:`milp_partition.cli.strategy_options`
when it builds the parser and :func:`cmd_solve`, :func:`cmd_evaluate` or
:func:`cmd_info` with the parsed arguments.  Bad input raises
:class:`~milp_partition.errors.InputError`, printed on one line with exit 2.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from milp_partition.calibration.profile import resolve_profile
from milp_partition.cli.claims import check_claims, read_result
from milp_partition.cli.exit_codes import EXIT_INFEASIBLE, EXIT_OK
from milp_partition.cli.options import reserved
from milp_partition.cli.output import check_writable, emit
from milp_partition.cli.pipeline import read_assignment
from milp_partition.cli.strategy_options import DEFAULT_BYTES_PER_ELEMENT, LAYERS_ONLY
from milp_partition.errors import InputError
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.io.strategy_tables import looks_like_strategy_tables, strategy_from_dict, write_strategy_tables
from milp_partition.report import fmt as _fmt
from milp_partition.report import fmt_bytes as _fmt_bytes
from milp_partition.report import gap_text, memory_margin_lines, run_lines
from milp_partition.result import Result
from milp_partition.settings import common_fields
from milp_partition.strategy.dimensions import dimension_names
from milp_partition.strategy.layers import (
    StrategyGenerationSettings,
    generate_strategy_problem,
    layer_graph_from_dict,
    looks_like_layer_graph,
)
from milp_partition.strategy.memory import MemoryModelSettings, with_memory
from milp_partition.strategy.problem import StrategySolution
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy
from milp_partition.units import parse_bytes
from milp_partition.verifiers.strategy import verify_strategy


def claims(data: object) -> bool:
    """A strategy-tables or strategy-layers JSON object."""

    return isinstance(data, dict) and (looks_like_strategy_tables(data) or looks_like_layer_graph(data))


def _read(args: argparse.Namespace) -> Any:
    return parse_json(read_text_file(args.instance), str(args.instance))


def read_problem(args: argparse.Namespace, data: Any = None):
    """Strategy tables as they are, or a strategy-layers file turned into tables with a device profile."""

    data = _read(args) if data is None else data
    if not looks_like_layer_graph(data):
        for dest in LAYERS_ONLY:
            if getattr(args, dest, None) is not None:
                raise InputError(
                    f"applies to strategy-layers files; a strategy-tables file carries its own "
                    f"{'p' if dest == 'devices' else 'costs'}",
                    where=f"--{dest}",
                )
        return strategy_from_dict(data, str(args.instance), default_name=Path(args.instance).stem)

    if args.devices is None:
        raise InputError("a strategy-layers file needs --devices (p, a power of two)", source=str(args.instance))
    profile = resolve_profile(args.profile or "H100")
    settings = StrategyGenerationSettings(
        devices=args.devices, bytes_per_element=args.bytes_per_element or DEFAULT_BYTES_PER_ELEMENT
    )
    if args.optimizer_factor is not None:
        settings = replace(settings, optimizer_state_factor=args.optimizer_factor)
    graph = layer_graph_from_dict(data, str(args.instance))
    return generate_strategy_problem(graph, profile, settings, source=str(args.instance))


def problem_from_args(args: argparse.Namespace):
    """The strategy problem under the command line's memory model and limit."""

    problem = read_problem(args)
    memory_model = args.memory_model or "static"
    if memory_model == "liveness":
        if any(n.memory_bytes is not None and n.activation_bytes is None for n in problem.nodes):
            raise InputError(
                "--memory-model liveness needs activation_bytes per configuration; this file has none", source=str(args.instance)
            )
        problem = replace(problem, memory_model="liveness")
    elif memory_model != "static":
        raise InputError(
            f"{memory_model} applies to the pipeline problem; strategy takes static or liveness",
            where="--memory-model",
        )
    if args.memory is not None:
        reserved_limit = reserved(parse_bytes(args.memory, "--memory"), args)  # --memory-reserve stays free of the plan
        assert reserved_limit is not None
        limit = int(reserved_limit)
        if any(n.memory_bytes is None for n in problem.nodes):
            settings = MemoryModelSettings(bytes_per_element=args.bytes_per_element or DEFAULT_BYTES_PER_ELEMENT)
            if args.optimizer_factor is not None:
                settings = replace(settings, optimizer_state_factor=args.optimizer_factor)
            problem = with_memory(problem, settings, memory_limit_bytes=limit)
        else:
            problem = problem.with_memory_limit(limit)
    return problem


def format_report(result: Result, problem: object, max_rows: int = 30) -> str:
    """A readable report of a strategy result."""
    inst = result.instance
    lines = [
        f"instance   {inst.get('source')}  ({inst.get('layers')} layers, {inst.get('configurations')} configurations, "
        f"{inst.get('edges')} edges, p = {inst.get('devices')})",
        f"problem    strategy, memory limit {_fmt_bytes(inst.get('memory_limit_bytes')) if inst.get('memory_limit_bytes') is not None else 'none'}",
        f"status     {result.status.upper()}" + (f"  ({result.message})" if result.message else ""),
    ]
    if result.objective is not None:
        lines.append(f"objective  cost = {_fmt(result.objective, 15)}   (verified; {result.time_unit or 'instance units'})")
        lines.append(f"bound      {_fmt(result.bound, 15)}   gap {gap_text(result.gap)}")
        if result.memory_bytes.get("per_device"):
            lines.append(f"memory     {_fmt_bytes(result.memory_bytes['per_device'])} per device")
            limit = inst.get("memory_limit_bytes")
            lines += memory_margin_lines({"each device": result.memory_bytes["per_device"]}, {"each device": limit})
    red = result.solver_notes.get("reduction")
    if red:
        lines.append(
            f"reduced    to {red['layers']} layers, {red['configurations']} configurations, {red['edges']} edges in {red['seconds']:.3f} s"
        )
    ties = result.solver_notes.get("ties")
    if ties:
        lines.append(
            f"tied       {ties['layers']} layers in {ties['groups']} groups of identical blocks (an approximation"
            + (f"; tied problem: {ties['tied_layers']} layers, {ties['tied_status']}" if "tied_layers" in ties else "")
            + ")"
        )
    lines.extend(run_lines(result, digits=15))
    if result.assignment:
        lines.append("")
        lines.append(f"{'layer':10s} configuration")
        for k, (layer, config) in enumerate(result.assignment.items()):
            if k == max_rows:
                lines.append(f"... {len(result.assignment) - max_rows} more in the result JSON (--output)")
                break
            lines.append(f"{layer:10s} {config}")
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    """``solve`` for a strategy instance."""

    if args.write_tables is not None:
        check_writable(args.write_tables, "--write-tables")
    problem = problem_from_args(args)
    if args.write_tables is not None:
        write_strategy_tables(problem, args.write_tables)
    settings = StrategySolveSettings(
        **common_fields(args.common),  # type: ignore[arg-type]
        reduce=not args.no_reduce,
        heuristics=not args.no_heuristics,
        dp_bound=args.dp_bound,
        cutoff=args.cutoff,
        tie_blocks=args.tie_blocks,
    )
    result = solve_strategy(problem, settings)
    result.instance["dimensions"] = dimension_names(problem)  # what each split factor splits, for 'plot'
    return emit(result, args, lambda: format_report(result, problem))


def _check_choice(problem: Any, assignment: dict[str, str], path: Path) -> None:
    """Bad input (exit 2), not an infeasible solution: an unknown layer, a configuration the layer lacks, a layer left out."""
    configs = {n.id: n.configs for n in problem.nodes}
    for layer, config in assignment.items():
        if layer not in configs:
            raise InputError(f"unknown layer id {layer!r} in the solution", source=str(path))
        if config not in configs[layer]:
            shown = ", ".join(list(configs[layer])[:5]) + (", ..." if len(configs[layer]) > 5 else "")
            raise InputError(
                f"unknown configuration {config!r}; this layer has {shown}", source=str(path), where=f"layer {layer!r}"
            )
    missing = [i for i in configs if i not in assignment]
    if missing:
        raise InputError("the solution gives no configuration for this layer", source=str(path), where=f"layer {missing[0]!r}")


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``evaluate`` for a strategy instance: verify a choice of configurations and print its cost."""

    problem = problem_from_args(args)
    assignment = read_assignment(args.solution, "strategy")
    _check_choice(problem, assignment, args.solution)
    report = verify_strategy(problem, StrategySolution(assignment))
    if not report.feasible:
        print("INFEASIBLE solution:")
        for line in report.violations:
            print(f"  - {line}")
        return EXIT_INFEASIBLE
    check_claims(
        read_result(args.solution),
        args.solution,
        "strategy",
        report.objective,
        {"memory_bytes": {"per_device": report.memory_bytes}},
        {"layers": len(problem.nodes), "edges": len(problem.edges)},
    )
    print(
        f"feasible; cost = {_fmt(report.objective, 15)} (layers {_fmt(report.node_cost, 15)}, re-distribution "
        f"{_fmt(report.edge_cost, 15)}); memory {_fmt_bytes(report.memory_bytes) if report.memory_bytes else '-'} per device"
    )
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    """``info`` for a strategy instance; the file is read and checked as ``solve`` would."""

    data = _read(args)
    if looks_like_layer_graph(data):
        lg = layer_graph_from_dict(data, str(args.instance))
        kinds: dict[str, int] = {}
        for layer in lg.layers:
            kinds[layer.kind] = kinds.get(layer.kind, 0) + 1
        print(f"file        {args.instance}")
        print(f"layers      {lg.name or '-'}: {len(lg.layers)} layers, {len(lg.edges)} edges (strategy-layers/1)")
        print(f"kinds       {', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}")
        print("solve with  --devices P [--profile H100|FILE] [--memory SIZE]")
        return EXIT_OK
    sp = strategy_from_dict(data, str(args.instance), default_name=Path(args.instance).stem)
    sizes = [len(n.configs) for n in sp.nodes]
    print(f"file        {args.instance}")
    print(f"strategy    {sp.name or '-'}: {len(sp.nodes)} layers, {len(sp.edges)} edges, p = {sp.devices}")
    print(f"configs     {sum(sizes)} in all, {min(sizes, default=0)} to {max(sizes, default=0)} per layer")
    print(
        f"memory      {'per configuration given' if all(n.memory_bytes is not None for n in sp.nodes) else 'none (derived from layer shapes with --memory)'}"
    )
    print(f"cost unit   {sp.cost_unit or '-'}")
    return EXIT_OK
