"""CLI part of Galvatron's problem: ``solve | evaluate | info`` on a Galvatron model profile folder.

``milp-partition solve MODEL_FOLDER --hardware HW_FOLDER --devices 8 --memory 36GiB --global-batch 16 -o plan.json``
(memory in GiB = Galvatron's "GB").  The result JSON holds ``galvatron_config``, Galvatron's runtime config.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from milp_partition.cli.output import emit
from milp_partition.errors import InputError
from milp_partition.galvatron.problem import GalvatronProblem, plan_from_config
from milp_partition.galvatron.solve import GalvatronResult, GalvatronSolveSettings, solve_galvatron
from milp_partition.io.galvatron import looks_like_galvatron, read_galvatron, read_model_profile
from milp_partition.report import fmt
from milp_partition.settings import common_fields
from milp_partition.units import parse_bytes
from milp_partition.verifiers.galvatron import verify_galvatron

EXIT_OK, EXIT_INFEASIBLE = 0, 3
#: What the strategy labels of the report (Galvatron's ``to_simple_string``) mean.
STRATEGY_LEGEND = (
    "legend     pp-tp_sp[*]-dp[f][-c][-sp]: pipeline degree - tensor/sequence-parallel degree (* when > 1) - "
    "data-parallel degree (f: ZeRO-3, else ZeRO-2; plain DDP at 1); -c: checkpointed; -sp: Ulysses sequence "
    "parallel (else Megatron tp); C: stage compute per micro-batch, R: with gradient sync"
)


def claims(data: object) -> bool:
    return False  # a folder, detected by :func:`claims_path`


def claims_path(path: Path) -> bool:
    return looks_like_galvatron(Path(path))


def problem_from_args(args: argparse.Namespace) -> GalvatronProblem:
    missing = [f for f, v in (("--hardware", args.hardware), ("--devices", args.devices), ("--memory", args.memory), ("--global-batch", args.global_batch)) if v is None]
    if missing:
        raise InputError("a Galvatron folder needs " + ", ".join(missing), source=str(args.instance))
    mem = parse_bytes(str(args.memory), "--memory")
    if mem % 1048576:
        raise InputError("must be a whole number of MiB", where="--memory")
    return read_galvatron(args.instance, args.hardware, devices=args.devices, memory_mb=mem // 1048576,
                          global_batch=args.global_batch, seq=args.seq_length)


def format_report(result: GalvatronResult, problem: GalvatronProblem) -> str:
    lines = [
        f"instance   {problem.source}  ({problem.model}, {problem.layers} layers, hidden {problem.hidden})",
        f"setting    {problem.devices} GPUs, {problem.memory_mb} MB each (usable {problem.usable_mb()}), global batch {problem.global_batch}",
        f"status     {result.status.upper()}" + (f"  ({result.message})" if result.message else ""),
    ]
    if result.objective is not None:
        cfg = result.galvatron_config
        lines.append(f"objective  sound 1F1B time = {fmt(result.objective, 10)} s   (verified); Galvatron's estimate "
                     f"{fmt(result.galvatron_estimate_s or 0.0, 10)} s")
        lines.append(f"bound      {fmt(result.bound, 10)}   pp {cfg['pp_deg']}, chunks {cfg['chunks']}, split {cfg['pp_division']}, "
                     f"vocabulary tp_sp {cfg['vtp']}{' sp' if cfg['vsp'] else ''}{' zero3' if cfg['embed_sdp'] else ''}")
        lines.append(f"{'stage':>5s} {'layers':>9s} {'C (s)':>12s} {'R (s)':>12s} {'MB':>7s}  strategies")
        for i, st in enumerate(result.stages):
            runs: list[list[object]] = []
            for lab in st["strategies"]:
                if runs and runs[-1][1] == lab:
                    runs[-1][0] = int(runs[-1][0]) + 1  # type: ignore[call-overload]
                else:
                    runs.append([1, lab])
            text = ", ".join(f"{n}x {lab}" for n, lab in runs)
            lines.append(f"{i + 1:5d} {st['layers'][0]:4d}-{st['layers'][1] - 1:<4d} {st['compute_s']:12.6f} {st['sync_s']:12.6f} {st['memory_mb']:7d}  {text}")
        lines.append(STRATEGY_LEGEND)
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    problem = problem_from_args(args)
    settings = GalvatronSolveSettings(**common_fields(args.common), heuristics=not args.no_heuristics)  # type: ignore[arg-type]
    result = solve_galvatron(problem, settings)
    return emit(result, args, lambda: format_report(result, problem))


def cmd_evaluate(args: argparse.Namespace) -> int:
    problem = problem_from_args(args)
    try:
        data = json.loads(Path(args.solution).read_text())
        cfg = data.get("galvatron_config", data)
        plan = plan_from_config(cfg)
    except (OSError, json.JSONDecodeError, ValueError, AttributeError) as exc:
        raise InputError(f"cannot read a Galvatron config: {exc}", source=str(args.solution)) from None
    rep = verify_galvatron(problem, plan)
    if not rep.feasible:
        print("INFEASIBLE plan:")
        for v in rep.violations:
            print(f"  - {v}")
        return EXIT_INFEASIBLE
    print(f"feasible; sound 1F1B time {fmt(rep.objective, 10)} s; Galvatron's estimate {fmt(rep.galvatron_estimate_s, 10)} s; "
          f"memory {list(rep.stage_memory_mb)} MB of {rep.usable_mb}")
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    prof = read_model_profile(args.instance)
    print(f"folder      {args.instance}")
    print(f"model       {prof['model']}: hidden {prof['hidden']}, time fit mode {prof['time_mode']}")
    for t in prof["layer_types"]:
        print(f"layer type  {t.name}: {t.count} layers, sequence {t.seq}, {t.parameter_mb:.1f} MB parameters, "
              f"forward {t.time_slope_ms:.4f} ms/sample + {t.time_intercept_ms:.4f} ms")
    print("solve with  --hardware FOLDER --devices N --memory 36GiB --global-batch B")
    return EXIT_OK
