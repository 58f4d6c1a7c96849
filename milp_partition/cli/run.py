"""``milp-partition run PLAN.json --steps N --output run.json``: run a joint plan with torch.distributed (:mod:`milp_partition.run`).

Before any worker starts: the plan and its graph are checked field by field (:func:`milp_partition.run.spec.read_run_spec`),
the model factory the graph names is run only when the user names it (``--factory``; the bundled test models need
not be named), the model is built once in this process (a factory that fails, exits or returns no module is bad
input here, not a worker's traceback), and a plan of more ranks than the machine can host is refused unless
``--oversubscribe``. The workers stop with the command (:func:`milp_partition.run.launch.run_ranks`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from milp_partition.cli import flags
from milp_partition.cli.exit_codes import EXIT_ERROR, EXIT_OK
from milp_partition.cli.output import check_not_an_input, check_writable
from milp_partition.errors import InputError
from milp_partition.importers.deps import require
from milp_partition.io.atomic import write_atomic
from milp_partition.report import fmt, fmt_bytes
from milp_partition.run.interleave import steps_for_seconds
from milp_partition.run.launch import WorkerFailed, check_host, host_limits, run_plan
from milp_partition.run.model import batch, build_model
from milp_partition.run.spec import RunSpec, read_run_spec

#: Most training steps of a run (every step's batch is drawn before the first; a run is a check, not a training job).
MAX_STEPS = 10_000


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` command."""
    p = subparsers.add_parser(
        "run",
        help="run a joint plan of an imported PyTorch model on torch.distributed and compare with the prediction",
        description="Run the plan of 'solve --problem joint' on an imported PyTorch model: one process per device "
        "(gloo on the CPU, nccl with CUDA), pipeline stages by torch.distributed.pipelining (1F1B), DDP, tensor "
        "parallelism by DTensor, recomputation by torch.utils.checkpoint; then the same steps in one process. "
        "Writes per-step losses of both, their largest relative difference, measured and predicted step time and memory.",
    )
    p.add_argument("plan", type=Path, help="the JSON result of solve --problem joint (its instance.source names the graph)")
    p.add_argument("--graph", help="the imported graph (default: the plan's instance.source)")
    p.add_argument(
        "--factory",
        help="MODULE:FACTORY that builds the model: the run imports and calls it only when named here (it must be the "
        "graph's; the bundled milp_partition.importers.models need not be named)",
    )
    p.add_argument(
        "--steps", type=flags.ranged_int(1, MAX_STEPS), default=6, help=f"training steps, 1 to {MAX_STEPS} (default 6)"
    )
    p.add_argument("--warmup", type=flags.ranged_int(0, MAX_STEPS), default=1, help="steps left out of the median (default 1)")
    p.add_argument(
        "--seconds",
        type=flags.nonnegative_seconds,
        default=0.0,
        metavar="S",
        help="time steps for at least S seconds: more steps than --steps where those would take less, judged by the "
        f"plan's planned step (at most {MAX_STEPS} steps in all; default 0). On a machine whose speed changes from one "
        "second to the next, a median over a few seconds is the plan's, not the moment's",
    )
    p.add_argument(
        "--warmup-seconds",
        type=flags.nonnegative_seconds,
        default=0.0,
        metavar="S",
        help="leave out at least S seconds of steps before the timed ones (more than --warmup where those would take "
        "less, judged likewise; default 0): a fresh process's first seconds are often slower",
    )
    p.add_argument("--seed", type=flags.seed, default=0, help="seed of the weights and the synthetic data (default 0)")
    p.add_argument("--threads", type=flags.threads, default=1, help="torch threads per process (default 1)")
    p.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="leave the CPU ranks' placement to the scheduler (default: each rank on cores of its own when the machine "
        "has a core for every rank's threads; two ranks left to the scheduler often share one core while another "
        "process holds the other)",
    )
    p.add_argument(
        "--oversubscribe",
        action="store_true",
        help="start the plan's processes even when they are more than this machine's cores or memory hold",
    )
    p.add_argument("--output", "-o", type=Path, help="write run.json here")
    p.set_defaults(handler=cmd_run)


def _say(line: str) -> None:
    print(f"run: {line}", file=sys.stderr, flush=True)


def check_model(spec: RunSpec, seed: int) -> None:
    """Build the model and its first batch here, before any worker: a factory that fails is bad input (exit 2)."""
    model = build_model(spec, seed)  # a factory that is missing, raises, exits or returns no module: InputError
    try:
        batch(spec, model, 0, seed)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(
            f"the model of {spec.model} fails on the recorded inputs {list(spec.inputs)}: {type(exc).__name__}: {exc}",
            source=spec.graph_path,
            where="layers.model.inputs",
        ) from None


def _print_run(args: argparse.Namespace, out: dict) -> None:  # type: ignore[type-arg]
    s = out["shape"]
    degrees = {(g["data_parallel"], g["tensor_parallel"]) for g in out["stage_degrees"]}
    shape = (
        f"{s['stages']} stages x data {s['data_parallel']} x tensor {s['tensor_parallel']}"
        if len(degrees) == 1
        else f"{s['stages']} stages, data x tensor "
        + ", ".join(f"{g['data_parallel']}x{g['tensor_parallel']}" for g in out["stage_degrees"])
    )
    print(f"plan       {args.plan}: {shape}, {out['ranks']} ranks ({out['backend']}), N = {out['microbatches']}")
    print("losses     " + " ".join(fmt(x, 7) for x in out["losses"]))
    print("single     " + " ".join(fmt(x, 7) for x in out["single_process_losses"]))
    print(f"loss diff  {out['loss_max_rel_diff']:.3g} (largest relative)")
    print(
        f"step       measured {fmt(out['measured_step_s'], 4)} s (median after {out['warmup_steps']} warm-up), "
        f"predicted {fmt(out['predicted_step_s'], 4)} s ({100 * out['step_rel_error']:+.1f}%; "
        f"the planner's objective x N: {fmt(out['planner_step_s'], 4)} s)"
    )
    for m in out["memory"]:
        print(
            f"memory     rank {m['rank']} (stage {m['stage']}): measured {fmt_bytes(m['measured_peak_bytes'])}, "
            f"predicted {fmt_bytes(m['predicted_bytes'])}"
        )
    for note in out["notes"]:
        print(f"note       {note}")


def cmd_run(args: argparse.Namespace) -> int:
    if args.output is not None:
        check_writable(args.output)
    spec = read_run_spec(args.plan, args.graph, args.factory)
    if args.output is not None:  # the graph the plan names is an input too
        check_not_an_input(args.output, [Path(spec.plan_path), Path(spec.graph_path)])
    if not args.oversubscribe:
        check_host(spec.world_size, args.threads, host_limits())
    require("torch")
    _say(f"building the model from {spec.model} (a check before the ranks start)")
    check_model(spec, args.seed)
    steps, warmup = steps_for_seconds(
        args.steps, min(args.warmup, args.steps - 1), spec.predicted_step_s, args.seconds, args.warmup_seconds, MAX_STEPS
    )
    if steps != args.steps:
        _say(f"{steps} steps ({warmup} of warm-up), for --seconds / --warmup-seconds at the planned step")
    try:
        out = run_plan(
            spec,
            steps,
            seed=args.seed,
            threads=args.threads,
            warmup=warmup,
            progress=_say,
            pin=args.pin,
        )
    except WorkerFailed as exc:
        print(f"milp-partition: error: {exc}", file=sys.stderr)
        if os.environ.get("MILP_PARTITION_DEBUG"):
            print(exc.details, file=sys.stderr)
        else:
            print("(MILP_PARTITION_DEBUG=1 prints the worker's traceback)", file=sys.stderr)
        return EXIT_ERROR
    _print_run(args, out)
    if args.output is not None:
        write_atomic(args.output, json.dumps(out, indent=1) + "\n")  # the old file stays whole if the write fails
        print(f"wrote      {args.output}")
    return EXIT_OK
