"""Command-line interface: ``milp-partition solve | evaluate | info``.

Exit codes: 0 a verified solution (optimal or feasible); 3 proven infeasible;
4 no solution found within the limits; 2 bad input or usage; 1 internal error
(the verifier rejected a solver's answer).  Errors print one line, never a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from milp_partition.cluster import Cluster, Link, homogeneous_cluster, make_cluster
from milp_partition.errors import InputError, MilpPartitionError
from milp_partition.pipeline.problem import Instance, PipelineProblem, PipelineSettings, PipelineSolution
from milp_partition.report import device_counts, gap_text, run_lines
from milp_partition.report import fmt as _fmt
from milp_partition.report import fmt_bytes as _fmt_bytes
from milp_partition.result import Result
from milp_partition.units import parse_bytes, parse_rate

EXIT_OK, EXIT_ERROR, EXIT_INPUT, EXIT_INFEASIBLE, EXIT_NO_SOLUTION = 0, 1, 2, 3, 4

# Modules that add further subcommands.  Each defines ``register(subparsers)``,
# which adds its parser and sets ``handler=<function(args) -> exit code>`` as a
# default; the function raises MilpPartitionError for bad input like the rest.
_COMMAND_MODULES: tuple[str, ...] = (
    "milp_partition.cli.importer",
    "milp_partition.cli.calibrate",
    "milp_partition.cli.gap",
    "milp_partition.cli.plot",
)


def _add_problem_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("problem")
    g.add_argument(
        "--problem",
        choices=["pipeline", "strategy", "placement"],
        help="which problem to solve (default: placement for a placement-instance file, strategy for a strategy-tables "
        "file, else pipeline)",
    )
    pl = p.add_argument_group("placement problem")
    pl.add_argument("--link-contention", action="store_true", help="serialize transfers leaving or entering one device")
    pl.add_argument(
        "--heuristic",
        action="append",
        metavar="NAME",
        help="placement heuristics to run for the warm start (heft, m-topo, m-etf, pardnn; repeat or comma-separate; default all)",
    )
    g.add_argument("--no-contiguous", action="store_true", help="drop the contiguity rule (any split of forward nodes)")
    g.add_argument(
        "--objective",
        choices=["time", "memory"],
        default="time",
        help="time: least time per sample; memory: least peak memory with time per sample <= --max-time-per-sample",
    )
    g.add_argument("--max-time-per-sample", type=float, help="bound on time per sample for --objective memory (graph time unit)")
    g.add_argument(
        "--memory-model",
        choices=["static", "1f1b", "liveness"],
        default="static",
        help="static: sum of node bytes; 1f1b: training pipeline, stage i of s keeps s-i micro-batches of activations; "
        "liveness (strategy): an activation counts only from its layer's step to its last consumer's",
    )
    g.add_argument(
        "--optimizer-factor",
        type=float,
        help="multiplier on parameter bytes (optimizer state): pipeline 1f1b default 1, strategy default 3",
    )
    st = p.add_argument_group("strategy problem")
    st.add_argument("--memory-limit", help="per-device memory limit on the chosen configurations, e.g. 2GiB")
    st.add_argument(
        "--bytes-per-element", type=int, default=4, help="element size when memory is derived from layer shapes (default 4)"
    )
    st.add_argument(
        "--profile",
        help="device profile for costs derived from FLOPs and bytes: a datasheet name (V100, A100, H100, H200) or a profile "
        "JSON file (strategy-layers files default to H100; pipeline: nodes without measured times get times from their FLOPs)",
    )
    st.add_argument(
        "--tie-blocks",
        action="store_true",
        help="strategy: give layers of identical repeated blocks one configuration (an approximation; the report says so)",
    )
    st.add_argument("--write-tables", type=Path, help="strategy: also write the (generated) problem as strategy-tables/1 JSON")
    c = p.add_argument_group("cluster (overrides the instance's own)")
    c.add_argument("--cluster", type=Path, help="a cluster JSON file (format milp-partition-cluster/1)")
    c.add_argument("--devices", type=int, help="number of identical accelerators")
    c.add_argument("--memory", help="memory per accelerator, e.g. 16GiB")
    c.add_argument("--cpu-cores", type=int, help="host CPU cores usable as devices")
    c.add_argument("--link-latency", type=float, help="link latency in seconds")
    c.add_argument("--link-bandwidth", help="link bandwidth, e.g. 12GB/s")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="milp-partition", description="Provably optimal partitioning of DNN graphs across GPUs."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    s = sub.add_parser("solve", help="solve an instance and print a verified report")
    s.add_argument("instance", type=Path, help="graph file: native JSON, Tarnawski JSON, PipeDream graph.txt, node-link JSON")
    _add_problem_options(s)
    o = s.add_argument_group("solver")
    o.add_argument("--solver", choices=["cpsat", "cbc", "none"], default="cpsat", help="back-end; none = heuristics only")
    o.add_argument("--time-limit", type=float, default=60.0, help="solver time limit in seconds (default 60)")
    o.add_argument("--threads", type=int, default=2, help="solver threads (default 2)")
    o.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    o.add_argument("--no-warm-start", action="store_true", help="do not hint the heuristic solution or bound by its value")
    o.add_argument("--no-heuristics", action="store_true", help="skip the DP heuristics")
    o.add_argument("--no-reduce", action="store_true", help="strategy: skip the exact reductions")
    o.add_argument("--dp-bound", action="store_true", help="strategy: bound the objective below by the exact DP's value")
    o.add_argument("--cutoff", action="store_true", help="strategy: bound the objective above by the DP solution's value")
    o.add_argument("--max-ideals", type=int, default=20000, help="cap on ideals enumerated by the ideal DP (default 20000)")
    o.add_argument("--progress", type=float, default=5.0, help="seconds between progress lines on stderr (default 5; 0 = off)")
    o.add_argument("--output", "-o", type=Path, help="write the result JSON here")
    o.add_argument("--quiet", "-q", action="store_true", help="print only the summary line")

    e = sub.add_parser("evaluate", help="verify a solution file and print its objective")
    e.add_argument("instance", type=Path)
    e.add_argument("solution", type=Path, help="a result JSON (its 'assignment') or a JSON object node id -> device id")
    _add_problem_options(e)

    i = sub.add_parser("info", help="describe an instance")
    i.add_argument("instance", type=Path)
    for module_name in _COMMAND_MODULES:
        importlib.import_module(module_name).register(sub)
    return parser


def _cluster_from_args(args: argparse.Namespace, instance: Instance) -> Cluster:
    from milp_partition.io import read_cluster

    if args.cluster is not None:
        base = read_cluster(args.cluster)
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
    if base is None and getattr(args, "profile", None):  # no cluster given: the profile's device-to-device link
        from milp_partition.calibration.profile import resolve_profile

        d2d = resolve_profile(args.profile).links["d2d"]
        link = Link(latency_s=d2d.alpha_s, bandwidth_bytes_per_s=d2d.bandwidth_bytes_per_s)
    if args.link_latency is not None or args.link_bandwidth is not None:
        link = Link(
            latency_s=args.link_latency if args.link_latency is not None else link.latency_s,
            bandwidth_bytes_per_s=parse_rate(args.link_bandwidth, "--link-bandwidth")
            if args.link_bandwidth
            else link.bandwidth_bytes_per_s,
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
        return homogeneous_cluster(count, memory, kind=kind, host_cpu_cores=cores, link=link, source="command line")
    return make_cluster(base.devices, host_cpu_cores=cores, link=link, source="command line")


def _problem_from_args(args: argparse.Namespace) -> PipelineProblem:
    from milp_partition.io import read_instance

    instance = read_instance(args.instance)
    graph = instance.graph
    if getattr(args, "profile", None):  # calibration: nodes without measured times get times from FLOPs and bytes
        from milp_partition.calibration.apply import apply_profile
        from milp_partition.calibration.profile import resolve_profile

        graph, _ = apply_profile(graph, resolve_profile(args.profile), source=str(args.instance))
    settings = PipelineSettings(
        contiguous=not args.no_contiguous,
        objective=args.objective,
        max_time_per_sample=args.max_time_per_sample,
        memory_model=args.memory_model,
        optimizer_state_factor=1.0 if args.optimizer_factor is None else args.optimizer_factor,
    )
    return PipelineProblem(graph, _cluster_from_args(args, instance), settings, source=str(args.instance))


def format_report(result: Result, problem: PipelineProblem) -> str:
    """A readable report of a pipeline result."""
    unit = result.time_unit or "units"
    lines = [
        f"instance   {problem.source}  ({len(problem.graph.nodes)} nodes, {len(problem.graph.edges)} edges, "
        f"{len(problem.cluster.devices)} accelerators, {problem.cluster.host_cpu_cores} CPU cores)",
        f"problem    pipeline, {'contiguous' if problem.settings.contiguous else 'non-contiguous'}, objective {problem.settings.objective}, "
        f"memory model {problem.settings.memory_model}",
        f"status     {result.status.upper()}" + (f"  ({result.message})" if result.message else ""),
    ]
    if result.objective is not None:
        obj = _fmt(result.objective) + (f" {unit}" if result.objective_name == "time_per_sample" else " bytes")
        lines.append(f"objective  {result.objective_name} = {obj}   (verified)")
        lines.append(f"bound      {_fmt(result.bound)}   gap {gap_text(result.gap)}")
    lines.extend(run_lines(result))
    if result.assignment:
        counts = device_counts(result, problem.device_ids)
        lines.append("")
        lines.append(f"{'device':10s} {'nodes':>6s} {'load (' + unit + ')':>18s} {'memory':>12s}")
        for dev in problem.device_ids:
            lines.append(
                f"{dev:10s} {counts.get(dev, 0):6d} {_fmt(result.loads.get(dev, 0.0)):>18s} "
                f"{_fmt_bytes(result.memory_bytes.get(dev)) if dev in result.memory_bytes else '-':>12s}"
            )
    return "\n".join(lines)


def _problem_kind(args: argparse.Namespace) -> str:
    if args.problem is not None:
        return args.problem
    from milp_partition.io.native import parse_json, read_text_file
    from milp_partition.io.strategy_tables import looks_like_strategy_tables
    from milp_partition.strategy.layers import looks_like_layer_graph

    text = read_text_file(args.instance)
    if text.lstrip()[:1] == "{":
        data = parse_json(text, str(args.instance))
        if isinstance(data, dict) and data.get("format") == "placement-instance/1":
            return "placement"
        if looks_like_strategy_tables(data) or looks_like_layer_graph(data):
            return "strategy"
    return "pipeline"


def _read_strategy_problem(args: argparse.Namespace):
    """Strategy tables as they are, or a strategy-layers file turned into tables with a device profile."""
    from milp_partition.io.native import parse_json, read_text_file
    from milp_partition.io.strategy_tables import strategy_from_dict
    from milp_partition.strategy.layers import (
        StrategyGenerationSettings,
        generate_strategy_problem,
        layer_graph_from_dict,
        looks_like_layer_graph,
    )

    data = parse_json(read_text_file(args.instance), str(args.instance))
    if not looks_like_layer_graph(data):
        return strategy_from_dict(data, str(args.instance), default_name=Path(args.instance).stem)
    from milp_partition.calibration.profile import resolve_profile

    if args.devices is None:
        raise InputError("a strategy-layers file needs --devices (p, a power of two)", source=str(args.instance))
    profile = resolve_profile(args.profile or "H100")
    settings = StrategyGenerationSettings(devices=args.devices, bytes_per_element=args.bytes_per_element)
    if args.optimizer_factor is not None:
        from dataclasses import replace

        settings = replace(settings, optimizer_state_factor=args.optimizer_factor)
    graph = layer_graph_from_dict(data, str(args.instance))
    return generate_strategy_problem(graph, profile, settings, source=str(args.instance))


def _strategy_from_args(args: argparse.Namespace):
    from dataclasses import replace

    from milp_partition.strategy.memory import MemoryModelSettings, with_memory

    problem = _read_strategy_problem(args)
    if args.memory_model == "liveness":
        if any(n.memory_bytes is not None and n.activation_bytes is None for n in problem.nodes):
            raise InputError(
                "--memory-model liveness needs activation_bytes per configuration; this file has none", source=str(args.instance)
            )
        problem = replace(problem, memory_model="liveness")
    elif args.memory_model != "static":
        raise InputError(f"--memory-model {args.memory_model} applies to the pipeline problem; strategy takes static or liveness")
    if args.memory_limit is not None:
        limit = parse_bytes(args.memory_limit, "--memory-limit")
        if any(n.memory_bytes is None for n in problem.nodes):
            settings = MemoryModelSettings(bytes_per_element=args.bytes_per_element)
            if args.optimizer_factor is not None:
                settings = replace(settings, optimizer_state_factor=args.optimizer_factor)
            problem = with_memory(problem, settings, memory_limit_bytes=limit)
        else:
            problem = replace(problem, memory_limit_bytes=limit)
    return problem


def format_strategy_report(result: Result, problem: object, max_rows: int = 30) -> str:
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


def _backend_settings(args: argparse.Namespace) -> dict[str, object]:
    """The solve-settings fields every problem takes from the solver options."""
    return {
        "solver": args.solver,
        "time_limit_s": args.time_limit,
        "threads": args.threads,
        "seed": args.seed,
        "progress_interval_s": None if (args.quiet or args.progress <= 0) else args.progress,
    }


def _cmd_solve_strategy(args: argparse.Namespace) -> int:
    from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy

    problem = _strategy_from_args(args)
    if args.write_tables is not None:
        from milp_partition.io.strategy_tables import write_strategy_tables

        write_strategy_tables(problem, args.write_tables)
    settings = StrategySolveSettings(
        **_backend_settings(args),
        reduce=not args.no_reduce,
        heuristics=not args.no_heuristics,
        warm_start=not args.no_warm_start,
        dp_bound=args.dp_bound,
        cutoff=args.cutoff,
        tie_blocks=args.tie_blocks,
    )
    result = solve_strategy(problem, settings)
    return _emit(result, args, lambda: format_strategy_report(result, problem))


def _emit(result: Result, args: argparse.Namespace, report) -> int:
    if args.output is not None:
        try:
            result.write(args.output)
        except OSError as exc:
            raise InputError(f"cannot write the result: {exc.strerror}", source=str(args.output)) from exc
    if args.quiet:
        print(
            f"{result.status} objective={_fmt(result.objective, 15)} bound={_fmt(result.bound, 15)} gap={_fmt(result.gap, 3)} "
            f"seconds={result.solve_seconds:.2f}"
        )
    else:
        print(report())
    return {"optimal": EXIT_OK, "feasible": EXIT_OK, "infeasible": EXIT_INFEASIBLE, "unknown": EXIT_NO_SOLUTION}.get(
        result.status, EXIT_ERROR
    )


def _cmd_solve(args: argparse.Namespace) -> int:
    from milp_partition.pipeline.solve import SolveSettings, solve_pipeline

    kind = _problem_kind(args)
    if kind == "placement":
        from milp_partition.cli.placement import cmd_solve

        return cmd_solve(args, _backend_settings(args), _emit)
    if kind == "strategy":
        return _cmd_solve_strategy(args)
    problem = _problem_from_args(args)
    settings = SolveSettings(
        **_backend_settings(args),
        warm_start=not args.no_warm_start,
        heuristics=not args.no_heuristics,
        max_ideals=args.max_ideals,
    )
    result = solve_pipeline(problem, settings)
    return _emit(result, args, lambda: format_report(result, problem))


def _read_assignment(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read the solution: {exc.strerror}", source=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}", source=str(path)) from exc
    if isinstance(data, dict) and isinstance(data.get("assignment"), dict):
        data = data["assignment"]
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise InputError(
            "expected a result JSON with an 'assignment' object, or an object mapping node id to device id", source=str(path)
        )
    return data


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from milp_partition.verifiers.pipeline import verify_pipeline

    kind = _problem_kind(args)
    if kind == "placement":
        from milp_partition.cli.placement import cmd_evaluate

        return cmd_evaluate(args)
    if kind == "strategy":
        return _evaluate_strategy(args)
    problem = _problem_from_args(args)
    report = verify_pipeline(problem, PipelineSolution(_read_assignment(args.solution)))
    if not report.feasible:
        print("INFEASIBLE solution:")
        for line in report.violations:
            print(f"  - {line}")
        return EXIT_INFEASIBLE
    print(
        f"feasible; time_per_sample = {_fmt(report.time_per_sample)} {problem.graph.time_unit}; "
        f"peak memory = {_fmt_bytes(report.peak_memory_bytes)}; objective ({problem.settings.objective}) = {_fmt(report.objective)}"
    )
    for dev in problem.device_ids:
        print(
            f"  {dev:10s} load {_fmt(report.loads.get(dev, 0.0)):>16s}  memory {_fmt_bytes(report.memory_bytes.get(dev)) if dev in report.memory_bytes else '-'}"
        )
    return EXIT_OK


def _evaluate_strategy(args: argparse.Namespace) -> int:
    from milp_partition.strategy.problem import StrategySolution
    from milp_partition.verifiers.strategy import verify_strategy

    report = verify_strategy(_strategy_from_args(args), StrategySolution(_read_assignment(args.solution)))
    if not report.feasible:
        print("INFEASIBLE solution:")
        for line in report.violations:
            print(f"  - {line}")
        return EXIT_INFEASIBLE
    print(
        f"feasible; cost = {_fmt(report.objective, 15)} (layers {_fmt(report.node_cost, 15)}, re-distribution "
        f"{_fmt(report.edge_cost, 15)}); memory {_fmt_bytes(report.memory_bytes) if report.memory_bytes else '-'} per device"
    )
    return EXIT_OK


def _cmd_info(args: argparse.Namespace) -> int:
    from milp_partition.io import read_instance

    args.problem = None
    kind = _problem_kind(args)
    if kind == "placement":
        from milp_partition.cli.placement import cmd_info

        return cmd_info(args)
    if kind == "strategy":
        from milp_partition.io.native import parse_json, read_text_file
        from milp_partition.io.strategy_tables import strategy_from_dict
        from milp_partition.strategy.layers import layer_graph_from_dict, looks_like_layer_graph

        data = parse_json(read_text_file(args.instance), str(args.instance))
        if looks_like_layer_graph(data):
            lg = layer_graph_from_dict(data, str(args.instance))
            kinds: dict[str, int] = {}
            for layer in lg.layers:
                kinds[layer.kind] = kinds.get(layer.kind, 0) + 1
            print(f"file        {args.instance}")
            print(f"layers      {lg.name or '-'}: {len(lg.layers)} layers, {len(lg.edges)} edges (strategy-layers/1)")
            print(f"kinds       {', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}")
            print("solve with  --devices P [--profile H100|FILE] [--memory-limit BYTES]")
            return EXIT_OK
        sp = strategy_from_dict(data, str(args.instance), default_name=Path(args.instance).stem)
        sizes = [len(n.configs) for n in sp.nodes]
        print(f"file        {args.instance}")
        print(f"strategy    {sp.name or '-'}: {len(sp.nodes)} layers, {len(sp.edges)} edges, p = {sp.devices}")
        print(f"configs     {sum(sizes)} in all, {min(sizes, default=0)} to {max(sizes, default=0)} per layer")
        print(
            f"memory      {'per configuration given' if all(n.memory_bytes is not None for n in sp.nodes) else 'none (derived from layer shapes with --memory-limit)'}"
        )
        print(f"cost unit   {sp.cost_unit or '-'}")
        return EXIT_OK
    inst = read_instance(args.instance)
    g = inst.graph
    fwd = sum(1 for n in g.nodes if not n.is_backward)
    groups = {n.colocation_group for n in g.nodes if n.colocation_group is not None}
    print(f"file        {args.instance}")
    print(
        f"graph       {g.name or '-'}: {len(g.nodes)} nodes ({fwd} forward, {len(g.nodes) - fwd} backward), {len(g.edges)} edges, "
        f"{len(groups)} colocation groups, time unit {g.time_unit}"
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
            f"{', '.join(_fmt_bytes(m) if m is not None else 'unbounded' for m in mems)}), {c.host_cpu_cores} CPU cores"
        )
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        handler = (
            getattr(args, "handler", None) or {"solve": _cmd_solve, "evaluate": _cmd_evaluate, "info": _cmd_info}[args.command]
        )
        return handler(args)
    except MilpPartitionError as exc:
        print(f"milp-partition: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("milp-partition: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly, as other command-line tools do
        import os

        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the flush at exit cannot fail again
        except (OSError, ValueError):
            pass
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
