"""Run joint plans on torch.distributed and compare predicted with measured: results/plan_runs.md.

    python benchmarks/plan_runs.py [--steps 6] [--microbatches 8] [--profile scratch/cpu.json] [--models WORD ...]

For GPT-small (``gpt_small_test``) and an MLP (``mlp_small_test``) on 2 devices: the optimum and the
pipeline-only, data-only and tensor-only plans (forced with ``--stages``, ``--data-parallel``,
``--tensor-parallel``), each run with ``milp-partition run`` (2 processes, gloo on the CPU, nccl with
CUDA: then it writes results/plan_runs_gpu.md, with GPT-2 small (124 M, 512 tokens a sample) too; on one
GPU the optimum alone, 1 x 1 x 1); predicted against measured step time and memory, the
error per plan, and whether the measured order of the plans matches the predicted order.
The prediction is ``run``'s own (:mod:`milp_partition.run.predict`: a 1F1B step-time formula over the
model's layers timed at one sample before each step, gloo's fits in the run's group, DTensor's and the
schedule's overheads), not the planner's objective (also listed). The machine's load is noted, and a
paragraph on what limits the prediction is written from what was measured.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "milp_partition"]
# model -> (factory, input, memory per device for the planner)
MODELS = {
    "GPT-small (test)": ("milp_partition.importers.models:gpt_small_test", "8x128:int64", "4GiB"),
    "MLP (test)": ("milp_partition.importers.models:mlp_small_test", "8x32", "4GiB"),
}
# run on a GPU only: a model whose kernels are not all launch latency (163 M parameters, 512 tokens a sample)
MODELS_GPU = {
    "GPT-2 small (124M)": ("milp_partition.importers.models:gpt", "8x512:int64", "64GiB"),
}
SHAPES = {
    "optimum": [],
    "pipeline-only": ["--stages", "2", "--data-parallel", "1", "--tensor-parallel", "1"],
    "data-only": ["--stages", "1", "--data-parallel", "2", "--tensor-parallel", "1"],
    "tensor-only": ["--stages", "1", "--data-parallel", "1", "--tensor-parallel", "2"],
}


def sh(args: list[str]) -> None:
    print("$ milp-partition " + " ".join(args[3:]), flush=True)
    subprocess.run(args, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def _load(avg: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.1f}" for x in avg)


def _limits(rows: list[dict]) -> str:
    """A paragraph on what limits the prediction, from the measured figures."""
    cores = os.cpu_count() or 1
    loads = [r["load_1min"] for r in rows]
    spread = statistics.median(r["step_spread"] for r in rows)
    worst = max(rows, key=lambda r: abs(r["step_error"]))
    tp = [r for r in rows if r["plan"] == "tensor-only"]
    parts = [
        f"The runs shared {cores} cores with other work: the 1-minute load average was {min(loads):.1f} to {max(loads):.1f} "
        f"while they ran (more runnable processes than cores whenever it is above {cores}), so a rank's share of a core "
        "changed from second to second. Measured step times after warm-up vary by a median of "
        f"{100 * spread:.0f}% (max - min over median) within one run, which bounds how close any prediction can be; "
        "the layer times that feed the formula are taken just before each step for this reason, and both ranks time "
        "them at once so that they compete for the cores as they do in the step.",
        f"The largest error is {worst['model']} {worst['plan']} ({100 * worst['step_error']:+.0f}%).",
    ]
    for model in MODELS:
        mine = [r for r in rows if r["model"] == model]
        if mine:
            parts.append(
                f"For {model} the runtime's own cost E (the plan's shape run with nothing to compute) is "
                f"{100 * min(r['empty_step_share'] for r in mine):.0f}-{100 * max(r['empty_step_share'] for r in mine):.0f}% "
                "of the predicted step."
            )
    low = [r for r in rows if r["step_error"] < 0]
    parts.append(
        f"{len(low)} of {len(rows)} predictions are below the measured step. The layer times come from one short pass "
        "(one sample) per step, the step from a second or more of sustained work by both ranks; on an oversubscribed "
        "machine a short burst after a wait tends to get more of a core than sustained work does, which would bias the "
        "prediction low (a likely cause, not one measured here)."
    )
    if tp:
        parts.append(
            "For tensor parallelism E runs as many column/row-parallel pairs of tiny linear modules as the plan splits, so "
            "DTensor's hooks and the four all-reduces per block and micro-batch (gloo's latency in a tight loop: "
            + ", ".join(f"{1e3 * r['allreduce_alpha_s']:.2f}" for r in tp)
            + " ms) are measured in the plan's pattern; they are "
            + ", ".join(f"{100 * r['empty_step_share']:.0f}%" for r in tp)
            + " of its predicted step."
        )
    parts.append(
        "The goal of 15% needs dedicated cores (or a GPU, where `run` times the same formula with nccl): then the layer "
        "times, the gloo latency and the step would stop moving with other sessions' load."
    )
    return " ".join(parts)


def _limits_gpu(rows: list[dict]) -> str:
    """A paragraph on what limits the prediction on a GPU, from the measured figures."""
    spread = statistics.median(r["step_spread"] for r in rows)
    worst = max(rows, key=lambda r: abs(r["step_error"]))
    parts = [
        f"On the GPU the measured step times after warm-up vary by a median of {100 * spread:.0f}% (max - min over "
        f"median) within one run. The largest error is {worst['model']} {worst['plan']} ({100 * worst['step_error']:+.0f}%).",
    ]
    for r in rows:
        parts.append(
            f"For {r['model']} {r['plan']} the runtime's own cost E (the plan's shape run with nothing to compute) is "
            f"{100 * r['empty_step_share']:.0f}% of the predicted step."
        )
    parts.append(
        "These test models are small: a layer's kernels take microseconds, so launch and Python overheads, not the "
        "GPU's FLOP rate, set their times; the layer times that feed the formula are taken at one sample just before "
        "each step, on the same GPU."
    )
    return " ".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--profile", default="scratch/cpu.json")
    ap.add_argument("--work", default="scratch/plan_runs")
    ap.add_argument(
        "--devices",
        type=int,
        help="devices per plan (default 2; 1 on a machine with one GPU: nccl takes one rank per GPU, and only the "
        "optimum, 1 x 1 x 1, has one device)",
    )
    ap.add_argument("--models", nargs="*", help="run only the models whose names contain one of these words")
    args = ap.parse_args()
    import torch

    gpu = torch.cuda.is_available()
    devices = args.devices or (1 if gpu and torch.cuda.device_count() < 2 else 2)
    shapes = SHAPES if devices >= 2 else {"optimum": SHAPES["optimum"]}
    work = ROOT / args.work
    work.mkdir(parents=True, exist_ok=True)
    profile = ROOT / args.profile
    if not gpu and not profile.exists():
        sh([*CLI, "calibrate", "--backend", "numpy", "--quick", "--no-progress", "-o", str(profile)])
    rows = []
    load_start = os.getloadavg()
    models = {**MODELS, **(MODELS_GPU if gpu else {})}
    if args.models:
        models = {m: v for m, v in models.items() if any(w.lower() in m.lower() for w in args.models)}
    for model, (ref, inp, memory) in models.items():
        graph = work / f"{ref.rsplit(':', 1)[1]}.json"
        sh(
            [
                *CLI,
                "import",
                "torch",
                ref,
                "--input",
                inp,
                "--training",
                "--granularity",
                "layer",
                *([] if gpu else ["--profile", str(profile)]),
                "--output",
                str(graph),
            ]
        )
        for shape, flags in shapes.items():
            plan = work / f"{graph.stem}_{shape}.json"
            run = work / f"{graph.stem}_{shape}_run.json"
            sh(
                [
                    *CLI,
                    "solve",
                    str(graph),
                    "--problem",
                    "joint",
                    "--devices",
                    str(devices),
                    "--memory",
                    memory,
                    "--microbatches",
                    str(args.microbatches),
                    "--quiet",
                    *flags,
                    "-o",
                    str(plan),
                ]
            )
            load = os.getloadavg()[0]
            sh([*CLI, "run", str(plan), "--steps", str(args.steps), "-o", str(run)])
            r = json.loads(run.read_text())
            s = r["shape"]
            mem = max(r["memory"], key=lambda m: m["measured_peak_bytes"])
            timed = r["step_s"][r["warmup_steps"] :] or r["step_s"]
            pred = r["prediction"]
            costs = pred["costs"]
            m_rep = pred["microbatches_per_replica"]
            dtensor = costs.get("dtensor_step_s", 0.0) / pred["step_s"]  # DTensor's overheads' share of the prediction
            rows.append(
                {
                    "model": model,
                    "plan": shape,
                    "shape": f"{s['stages']}x{s['data_parallel']}x{s['tensor_parallel']}",
                    "ranks": r["ranks"],
                    "loss_max_rel_diff": r["loss_max_rel_diff"],
                    "predicted_step_s": r["predicted_step_s"],
                    "measured_step_s": r["measured_step_s"],
                    "step_error": r["step_rel_error"],
                    "planner_step_s": r["planner_step_s"],
                    "predicted_memory_bytes": mem["predicted_bytes"],
                    "measured_memory_bytes": mem["measured_peak_bytes"],
                    "memory_error": (mem["predicted_bytes"] - mem["measured_peak_bytes"]) / mem["measured_peak_bytes"],
                    "step_spread": (max(timed) - min(timed)) / statistics.median(timed),
                    "load_1min": load,
                    "p2p_alpha_s": costs["p2p_alpha_s"],
                    "allreduce_alpha_s": costs["allreduce_alpha_s"],
                    "dtensor_share": dtensor,
                    "empty_step_share": costs.get("empty_step_s", 0.0) / pred["step_s"],
                    "microbatches_per_replica": m_rep,
                }
            )
        _write(rows, models, args, gpu, devices, load_start)  # after each model: a cut-short run keeps the models done
    return 0


def _write(
    rows: list[dict], models: dict, args: argparse.Namespace, gpu: bool, devices: int, load_start: tuple[float, float, float]
) -> None:
    """results/plan_runs[_gpu].{csv,md,png} from the rows measured so far."""
    name = "plan_runs_gpu" if gpu else "plan_runs"
    out = ROOT / "results"
    with open(out / f"{name}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [
        f"<!-- written by benchmarks/plan_runs.py (--steps {args.steps} --microbatches {args.microbatches}); do not edit -->",
        f"# Plans run on torch.distributed: predicted against measured ({'CUDA, nccl' if gpu else 'CPU, gloo'})",
        "",
        f"{devices} device{'s' if devices > 1 else ''}{' (one GPU)' if gpu and devices == 1 else ''}, {args.microbatches} micro-batches of one sample, {args.steps} steps (the first is warm-up; the median of "
        "the rest, wall time, the slowest rank per step). Shape = stages x data-parallel x tensor-parallel. "
        "Predicted: `run`'s step-time formula (milp_partition/run/predict.py: 1F1B over the layers timed at one sample "
        f"just before each step, {'nccl' if gpu else 'gloo'}'s latency and bandwidth measured in the run's group, DTensor's and the schedule's "
        "overheads, DDP's all-reduce and the optimizer step); planner: the plan's objective (time per sample) x N, "
        "for reference. Memory, the largest rank: predicted = the planner's stage memory; measured = "
        + (
            "torch.cuda.max_memory_allocated"
            if gpu
            else "its tensors: weights + gradients + optimizer state + peak saved activations"
        )
        + f". Machine: {os.cpu_count()} cores, load average (1, 5, 15 min) {_load(load_start)} at the start and "
        f"{_load(os.getloadavg())} at the end; the load column is the 1-minute average as each run started.",
        "",
        "| model | plan | shape | ranks | loss max rel diff | predicted step (s) | measured step (s) | error | planner (s) | "
        "predicted memory | measured memory | memory error | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['plan']} | {r['shape']} | {r['ranks']} | {r['loss_max_rel_diff']:.2g} | "
            f"{r['predicted_step_s']:.4g} | {r['measured_step_s']:.4g} | {100 * r['step_error']:+.0f}% | "
            f"{r['planner_step_s']:.3g} | {r['predicted_memory_bytes'] / 2**20:.2f} MiB | "
            f"{r['measured_memory_bytes'] / 2**20:.2f} MiB | {100 * r['memory_error']:+.0f}% | {r['load_1min']:.1f} |"
        )
    lines.append("")
    within = [r for r in rows if abs(r["step_error"]) <= 0.5]
    close = [r for r in rows if abs(r["step_error"]) <= 0.15]
    lines.append(
        f"- Within 50% of measured: {len(within)} of {len(rows)} plans; within 15%: {len(close)} of {len(rows)}; "
        f"every run {'within' if all(r['loss_max_rel_diff'] <= 1e-4 for r in rows) else 'NOT within'} 1e-4 of one process's losses."
    )
    for model in models:
        mine = [r for r in rows if r["model"] == model and r["plan"] != "optimum"]
        if len(mine) < 2:
            continue  # one plan per model (one device): no order to compare
        pred = [r["plan"] for r in sorted(mine, key=lambda r: r["predicted_step_s"])]
        meas = [r["plan"] for r in sorted(mine, key=lambda r: r["measured_step_s"])]
        lines.append(
            f"- {model}: predicted order {' < '.join(pred)}; measured {' < '.join(meas)}: "
            f"{'the same' if pred == meas else 'different'}."
        )
    lines += ["", "## What limits the prediction here", "", _limits_gpu(rows) if gpu else _limits(rows)]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for model, marker in zip(models, "os^"):
            mine = [r for r in rows if r["model"] == model]
            ax.scatter([r["predicted_step_s"] for r in mine], [r["measured_step_s"] for r in mine], marker=marker, label=model)
            for r in mine:
                ax.annotate(r["plan"], (r["predicted_step_s"], r["measured_step_s"]), fontsize=7)
        lo = min(min(r["predicted_step_s"], r["measured_step_s"]) for r in rows)
        hi = max(max(r["predicted_step_s"], r["measured_step_s"]) for r in rows)
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="measured = predicted")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("predicted step time (s)")
        ax.set_ylabel("measured step time (s)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=120)
        lines += ["", f"![predicted against measured]({name}.png)"]
    except ImportError:
        pass
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote results/{name}.md")


if __name__ == "__main__":
    sys.exit(main())
