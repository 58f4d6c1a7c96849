"""``milp-partition run PLAN.json --steps N --output run.json``: run a joint plan with torch.distributed (:mod:`milp_partition.run`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from milp_partition.cli.exit_codes import EXIT_OK
from milp_partition.cli.output import check_writable
from milp_partition.errors import InputError
from milp_partition.importers.deps import require
from milp_partition.io.atomic import write_atomic
from milp_partition.report import fmt, fmt_bytes
from milp_partition.run.launch import run_plan
from milp_partition.run.spec import read_run_spec


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
    p.add_argument("--steps", type=int, default=6, help="training steps (default 6)")
    p.add_argument("--warmup", type=int, default=1, help="steps left out of the median step time (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the synthetic data (default 0)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    p.add_argument("--output", "-o", type=Path, help="write run.json here")
    p.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    if args.steps < 1 or args.threads < 1 or args.warmup < 0:
        raise InputError("--steps and --threads must be positive, --warmup not negative", where="--steps")
    if args.output is not None:
        check_writable(args.output)
    require("torch")
    spec = read_run_spec(args.plan, args.graph)
    out = run_plan(spec, args.steps, seed=args.seed, threads=args.threads, warmup=min(args.warmup, args.steps - 1))
    s = out["shape"]
    print(
        f"plan       {args.plan}: {s['stages']} stages x data {s['data_parallel']} x tensor {s['tensor_parallel']}, "
        f"{out['ranks']} ranks ({out['backend']}), N = {out['microbatches']}"
    )
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
    if args.output is not None:
        write_atomic(args.output, json.dumps(out, indent=1) + "\n")  # the old file stays whole if the write fails
        print(f"wrote      {args.output}")
    return EXIT_OK
