"""CLI part of the heterogeneous problem (issue 40): ``solve | evaluate | info`` on Sailor's benchmark folder.

``milp-partition solve ../shared/benchmarks/hetero --setting opt350-a32-v96 -o plan.json`` (a name in
``reference/settings.json``), or ``--setting-file FILE`` (one setting: model, global_batch, gpus per
``<kind>_<zone>``), or ``--trace CSV --row N --model M``.  ``--objective sound`` prices the sound variant.
The result JSON carries ``sailor_plan`` (Sailor's plan format) beside status, objective (iteration seconds),
throughput, bound and gap.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from milp_partition.cli.output import emit
from milp_partition.errors import InputError
from milp_partition.hetero.problem import HeteroProblem, Objective
from milp_partition.hetero.solve import HeteroResult, HeteroSolveSettings, solve_hetero
from milp_partition.io.sailor import describe, looks_like_sailor, read_sailor, setting_names
from milp_partition.report import fmt
from milp_partition.settings import common_fields
from milp_partition.verifiers.hetero import verify_hetero

EXIT_OK, EXIT_INFEASIBLE = 0, 3


def claims(data: object) -> bool:
    return False  # a folder, detected by :func:`claims_path`


def claims_path(path: Path) -> bool:
    return looks_like_sailor(Path(path))


def problem_from_args(args: argparse.Namespace) -> HeteroProblem:
    given = getattr(args, "objective", None) or "sailor"
    if given not in ("sailor", "sound"):
        raise InputError("the hetero problem takes sailor (default) or sound", where="--objective")
    objective: Objective = "sound" if given == "sound" else "sailor"
    return read_sailor(
        args.instance,
        setting=args.setting,
        setting_file=args.setting_file,
        trace=args.trace,
        row=args.row,
        model=args.model,
        global_batch=args.global_batch,
        objective=objective,
    )


def format_report(result: HeteroResult, problem: HeteroProblem) -> str:
    gpus = ", ".join(f"{c.count} {c.label}" for c in problem.cluster.columns)
    lines = [
        f"setting    {problem.setting or problem.source}: {problem.model.name}, global batch {problem.global_batch}, {gpus}",
        f"status     {result.status.upper()}" + (f"  ({result.message})" if result.message else ""),
    ]
    if result.objective is not None:
        lines.append(
            f"objective  iteration time = {fmt(result.objective, 10)} s ({problem.objective}; verified), "
            f"throughput {fmt(result.throughput_it_s or 0.0, 6)} it/s"
        )
        lines.append(
            f"bound      {fmt(result.bound, 10) if result.bound is not None else '-'} s   gap "
            f"{'-' if result.gap is None else f'{100 * result.gap:.3f}%'}   mbs {result.sailor_plan.get('mbs')}"
        )
        for i, st in enumerate(result.stages):
            reps = ", ".join(f"{n}x {k}" for k, n in st["replicas"].items())
            lines.append(
                f"stage {i:<3d} layers {st['layers'][0]:>2d}-{st['layers'][1] - 1:<3d} C {st['compute_s']:.5f} s  "
                f"X {st['sends_s']:.5f} s  AR {st['allreduce_s']:.5f} s  {st['memory_bytes'] / 2**30:.1f} GiB  {reps}"
            )
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    problem = problem_from_args(args)
    gap = {} if getattr(args, "stop_gap", None) is None else {"pool_stop_gap": args.stop_gap}
    settings = HeteroSolveSettings(**common_fields(args.common), heuristics=not args.no_heuristics, **gap)  # type: ignore[arg-type]
    result = solve_hetero(problem, settings)
    return emit(result, args, lambda: format_report(result, problem))


def cmd_evaluate(args: argparse.Namespace) -> int:
    problem = problem_from_args(args)
    try:
        data = json.loads(Path(args.solution).read_text())
        plan = data.get("sailor_plan") or data.get("plan") or data
    except (OSError, json.JSONDecodeError, AttributeError) as exc:
        raise InputError(f"cannot read a plan: {exc}", source=str(args.solution)) from None
    rep = verify_hetero(problem, plan)
    if not rep.feasible:
        print("INFEASIBLE plan:")
        for v in rep.violations:
            print(f"  - {v}")
        return EXIT_INFEASIBLE
    print(
        f"feasible; iteration time {fmt(rep.iteration_s or 0.0, 10)} s ({problem.objective}), throughput "
        f"{fmt(rep.throughput_it_s or 0.0, 6)} it/s"
    )
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    """The folder and its named settings, or with ``--setting``, ``--setting-file`` or ``--trace`` that one setting."""
    names = setting_names(args.instance)
    print(f"folder      {args.instance} (Sailor's benchmark: profiles, traces, network fits)")
    print(f"settings    {', '.join(names) if names else '(none)'}")
    chosen = any(getattr(args, k, None) is not None for k in ("setting", "setting_file", "trace"))
    problems = (
        [problem_from_args(args)]
        if chosen
        else [problem_from_args(argparse.Namespace(**{**vars(args), "setting": n})) for n in names]
    )
    for problem in problems:
        for line in describe(problem):
            print("  " + line)
    print("solve with  --setting NAME | --setting-file FILE | --trace CSV --row N --model M  [--objective sound]")
    return EXIT_OK
