"""Run joint plans on torch.distributed and compare predicted with measured: results/plan_runs.md.

    python benchmarks/plan_runs.py [--steps 4] [--microbatches 8] [--profile scratch/cpu.json]

For GPT-small (``gpt_small_test``) and an MLP (``mlp_small_test``) on 2 devices: the optimum and the
pipeline-only, data-only and tensor-only plans (forced with ``--stages``, ``--data-parallel``,
``--tensor-parallel``), each run with ``milp-partition run`` (2 processes, gloo on the CPU, nccl with
CUDA: then it writes results/plan_runs_gpu.md); predicted against measured step time and memory, the
error per plan, and whether the measured order of the plans matches the predicted order.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "milp_partition"]
MODELS = {
    "GPT-small (test)": ("milp_partition.importers.models:gpt_small_test", "8x128:int64"),
    "MLP (test)": ("milp_partition.importers.models:mlp_small_test", "8x32"),
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--profile", default="scratch/cpu.json")
    ap.add_argument("--work", default="scratch/plan_runs")
    args = ap.parse_args()
    import torch

    gpu = torch.cuda.is_available()
    work = ROOT / args.work
    work.mkdir(parents=True, exist_ok=True)
    profile = ROOT / args.profile
    if not gpu and not profile.exists():
        sh([*CLI, "calibrate", "--backend", "numpy", "--quick", "--no-progress", "-o", str(profile)])
    rows = []
    for model, (ref, inp) in MODELS.items():
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
        for shape, flags in SHAPES.items():
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
                    "2",
                    "--memory",
                    "4GiB",
                    "--microbatches",
                    str(args.microbatches),
                    "--quiet",
                    *flags,
                    "-o",
                    str(plan),
                ]
            )
            sh([*CLI, "run", str(plan), "--steps", str(args.steps), "-o", str(run)])
            r = json.loads(run.read_text())
            s = r["shape"]
            mem = max(r["memory"], key=lambda m: m["measured_peak_bytes"])
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
                    "predicted_memory_bytes": mem["predicted_bytes"],
                    "measured_memory_bytes": mem["measured_peak_bytes"],
                }
            )
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
        f"2 devices, {args.microbatches} micro-batches of one sample, {args.steps} steps (the first is warm-up; the median of "
        "the rest). Shape = stages x data-parallel x tensor-parallel. Memory: the largest rank's "
        + ("torch.cuda.max_memory_allocated" if gpu else "peak RSS during the steps minus RSS before the model")
        + ".",
        "",
        "| model | plan | shape | ranks | loss max rel diff | predicted step (s) | measured step (s) | error | predicted memory | measured memory |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['plan']} | {r['shape']} | {r['ranks']} | {r['loss_max_rel_diff']:.2g} | "
            f"{r['predicted_step_s']:.4g} | {r['measured_step_s']:.4g} | {100 * r['step_error']:+.0f}% | "
            f"{r['predicted_memory_bytes'] / 2**20:.2f} MiB | {r['measured_memory_bytes'] / 2**20:.2f} MiB |"
        )
    lines.append("")
    for model in MODELS:
        mine = [r for r in rows if r["model"] == model and r["plan"] != "optimum"]
        pred = [r["plan"] for r in sorted(mine, key=lambda r: r["predicted_step_s"])]
        meas = [r["plan"] for r in sorted(mine, key=lambda r: r["measured_step_s"])]
        lines.append(
            f"- {model}: predicted order {' < '.join(pred)}; measured {' < '.join(meas)}: "
            f"{'the same' if pred == meas else 'different'}."
        )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for model, marker in zip(MODELS, "os"):
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
