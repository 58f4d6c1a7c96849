"""CLI part of Galvatron's problem: ``solve | evaluate | info`` on a Galvatron model profile folder.

``milp-partition solve MODEL_FOLDER --hardware HW_FOLDER --devices 8 --memory 36GiB --global-batch 16 -o plan.json``
(memory in GiB = Galvatron's "GB").  The result JSON holds ``galvatron_config``, Galvatron's runtime config.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from milp_partition.cli.claims import check_claims, read_result
from milp_partition.cli.export import write_export
from milp_partition.cli.output import emit
from milp_partition.errors import InputError
from milp_partition.galvatron.problem import GalvatronProblem, stage_rows
from milp_partition.galvatron.solve import GalvatronResult, GalvatronSolveSettings, solve_galvatron
from milp_partition.io.export.galvatron import config_mismatches, plan_from_config
from milp_partition.io.galvatron import (
    KNOWN_MODELS,
    layer_type_count,
    looks_like_galvatron,
    profile_files,
    read_galvatron,
    read_model_profile,
)
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.report import fmt
from milp_partition.settings import common_fields
from milp_partition.units import parse_bytes
from milp_partition.verifiers.galvatron import verify_galvatron

EXIT_OK, EXIT_INFEASIBLE = 0, 3
#: What the strategy labels of the report (Galvatron's ``to_simple_string``) mean.
STRATEGY_LEGEND = (
    "legend     pp-tp_sp[*]-dp[f][-c][-sp]: pipeline degree - tensor/sequence-parallel degree (* when > 1) - "
    "data-parallel degree (f: ZeRO-3, else ZeRO-2; plain DDP at 1); -c: checkpointed; -sp: Ulysses sequence "
    "parallel (else Megatron tp); C: stage compute per micro-batch, R: with gradient sync; MiB: memory per GPU (Galvatron's "
    '"MB" is 2**20 bytes)'
)


def claims(data: object) -> bool:
    return False  # a folder, detected by :func:`claims_path`


def claims_path(path: Path) -> bool:
    return looks_like_galvatron(Path(path))


def _layer_counts(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        counts = tuple(int(x) for x in text.split(","))
    except ValueError:
        counts = ()
    if not counts or any(c < 1 for c in counts):
        raise InputError(
            f"expected positive layer counts separated by commas (e.g. 32 or 24,24), got {text!r}", where="--layer-counts"
        )
    return counts


def problem_from_args(args: argparse.Namespace) -> GalvatronProblem:
    missing = [
        f
        for f, v in (
            ("--hardware", args.hardware),
            ("--devices", args.devices),
            ("--memory", args.memory),
            ("--global-batch", args.global_batch),
        )
        if v is None
    ]
    if missing:
        raise InputError("a Galvatron folder needs " + ", ".join(missing), source=str(args.instance))
    mem = parse_bytes(str(args.memory), "--memory")
    if mem % 1048576:
        raise InputError("must be a whole number of MiB", where="--memory")
    if args.hidden_size is not None and args.hidden_size < 1:
        raise InputError(f"must be a positive integer, got {args.hidden_size}", where="--hidden-size")
    return read_galvatron(
        args.instance,
        args.hardware,
        devices=args.devices,
        memory_mb=mem // 1048576,
        global_batch=args.global_batch,
        seq=args.seq_length,
        hidden=args.hidden_size,
        layers=_layer_counts(args.layer_counts),
    )


def format_report(result: GalvatronResult, problem: GalvatronProblem) -> str:
    lines = [
        f"instance   {problem.source}  ({problem.model}, {problem.layers} layers, hidden {problem.hidden})",
        f"setting    {problem.devices} GPUs, {problem.memory_mb} MiB each (usable {problem.usable_mb()} MiB), global batch {problem.global_batch}",
        f"status     {result.status.upper()}" + (f"  ({result.message})" if result.message else ""),
    ]
    if result.objective is not None:
        cfg = result.galvatron_config
        lines.append(
            f"objective  sound 1F1B time = {fmt(result.objective, 10)} s   (verified); Galvatron's estimate "
            f"{fmt(result.galvatron_estimate_s or 0.0, 10)} s"
        )
        lines.append(
            f"bound      {fmt(result.bound, 10)}   pp {cfg['pp_deg']}, chunks {cfg['chunks']}, split {cfg['pp_division']}, "
            f"vocabulary tp_sp {cfg['vtp']}{' sp' if cfg['vsp'] else ''}{' zero3' if cfg['embed_sdp'] else ''}"
        )
        lines.append(f"{'stage':>5s} {'layers':>9s} {'C (s)':>12s} {'R (s)':>12s} {'MiB':>7s}  strategies")
        for i, st in enumerate(result.stages):
            runs: list[list[object]] = []
            for lab in st["strategies"]:
                if runs and runs[-1][1] == lab:
                    runs[-1][0] = int(runs[-1][0]) + 1  # type: ignore[call-overload]
                else:
                    runs.append([1, lab])
            text = ", ".join(f"{n}x {lab}" for n, lab in runs)
            lines.append(
                f"{i + 1:5d} {st['layers'][0]:4d}-{st['layers'][1] - 1:<4d} {st['compute_s']:12.6f} {st['sync_s']:12.6f} {st['memory_mb']:7d}  {text}"
            )
        lines.append(STRATEGY_LEGEND)
    return "\n".join(lines)


def cmd_solve(args: argparse.Namespace) -> int:
    problem = problem_from_args(args)
    settings = GalvatronSolveSettings(**common_fields(args.common), heuristics=not args.no_heuristics)  # type: ignore[arg-type]
    result = solve_galvatron(problem, settings)
    code = emit(result, args, lambda: format_report(result, problem))
    if code == 0:
        write_export(args, problem, plan_from_config(result.galvatron_config) if result.galvatron_config else None)
    return code


def _read_config(path: Path) -> dict[str, object]:
    """The ``galvatron_config`` of a result file, or a bare runtime config (an object); anything else is bad input."""
    data = parse_json(read_text_file(path), str(path))
    cfg = data.get("galvatron_config", data) if isinstance(data, dict) else data
    if not isinstance(cfg, dict):
        raise InputError(
            "expected a result JSON with a 'galvatron_config' object, or a Galvatron runtime config", source=str(path)
        )
    if not cfg:
        status = data.get("status") if isinstance(data, dict) else None
        raise InputError(f"holds no plan (status {status!r}): nothing to evaluate", source=str(path))
    return cfg


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Verify a plan (a result's ``galvatron_config`` or a bare config) and every claim its result file makes.

    A config outside its fields' domains, one whose setting fields (``global_bsz``, ``pipeline_type``,
    ``default_dp_type``) differ from the setting evaluated, or a plan outside Galvatron's space is bad input (exit 2);
    a plan in the space that runs out of memory is infeasible (exit 3); a claim the verifier contradicts exits 2.
    """
    problem = problem_from_args(args)
    source = str(args.solution)
    claimed = read_result(args.solution)
    cfg = _read_config(args.solution)
    try:
        plan = plan_from_config(cfg)
    except ValueError as exc:
        raise InputError(f"not a valid Galvatron config: {exc}", source=source) from None
    wrong = config_mismatches(problem, cfg)
    rep = verify_galvatron(problem, plan)
    if not rep.in_space:
        wrong += list(rep.violations)
    if wrong:
        raise InputError("the plan does not fit the setting evaluated: " + "; ".join(wrong[:6]), source=source)
    if not rep.feasible:
        print("INFEASIBLE plan:")
        for v in rep.violations:
            print(f"  - {v}")
        return EXIT_INFEASIBLE
    check_claims(
        claimed,
        args.solution,
        "galvatron",
        rep.objective,
        {
            "galvatron_estimate_s": rep.galvatron_estimate_s,
            "stages": stage_rows(problem, plan, rep.stage_compute_s, rep.stage_sync_s, rep.stage_memory_mb),
            "peak_memory_bytes": max(rep.stage_memory_mb) * 1048576,
        },
        {
            "model": problem.model,
            "layers": [t.count for t in problem.layer_types],
            "devices": problem.devices,
            "memory_mb": problem.memory_mb,
            "global_batch": problem.global_batch,
        },
    )
    print(
        f"feasible; sound 1F1B time {fmt(rep.objective, 10)} s; Galvatron's estimate {fmt(rep.galvatron_estimate_s, 10)} s; "
        f"memory {list(rep.stage_memory_mb)} MiB of {rep.usable_mb}"
    )
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    """The folder's model, layer types and fits; for a model Galvatron does not ship, what ``solve`` will need."""
    name = profile_files(args.instance)[0]
    known = name in KNOWN_MODELS
    # an unknown model's hidden size and layer counts are not in its files: read its fits with placeholders, show "?"
    prof = (
        read_model_profile(args.instance)
        if known
        else read_model_profile(args.instance, hidden=1, layers=(1,) * max(1, layer_type_count(args.instance)))
    )
    print(f"folder      {args.instance}")
    print(
        f"model       {prof['model']}: hidden {prof['hidden'] if known else '? (not one Galvatron ships)'}, "
        f"time fit mode {prof['time_mode']}"
    )
    for t in prof["layer_types"]:
        print(
            f"layer type  {t.name}: {t.count if known else '?'} layers, sequence {t.seq}, {t.parameter_mb:.1f} MiB parameters, "
            f"forward {t.time_slope_ms:.4f} ms/sample + {t.time_intercept_ms:.4f} ms"
        )
    need = "" if known else " --hidden-size H --layer-counts L"
    print(f"solve with  --hardware FOLDER --devices N --memory 36GiB --global-batch B{need}")
    return EXIT_OK
