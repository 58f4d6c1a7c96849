"""Plan fidelity: the planner's step against the measured step, one point per plan: results/plan_fidelity.md.

    python benchmarks/plan_fidelity.py [--devices 2] [--microbatches 2 4 8] [--steps 4] [--models mlp gpt conv]
                                       [--quick] [--fresh] [--device cpu|cuda]

For three models of different kinds (an MLP, a GPT and a convolutional net, from
``milp_partition.importers.models``), every forced shape stages x data x tensor that fits ``--devices``
(``solve --problem joint --stages S --data-parallel D --tensor-parallel T --devices S*D*T``; a shape the planner
finds infeasible or does not offer is listed as such), at each micro-batch count N, each without and with
recomputation (the same plan with every layer that has an ``activation recomp`` configuration switched to it,
priced by the joint verifier: the planner's own model), plus the free optimum (``solve`` without a shape on
``--devices``), each run with ``milp-partition run``. Per plan: the planner's step (run.json's ``planner_step_s``,
the objective x N) against the measured step (the median after warm-up, slowest rank); the median and largest
error, Spearman's rank correlation of planned and measured steps, the free optimum's measured step over the
fastest measured plan at the same N, and each rank's planned memory against what it held (run.json's
``memory``: on the CPU its tensors, on a GPU ``max_memory_allocated``).

Resumable: a plan whose run.json is already in ``--work`` is not run again unless ``--fresh``. ``--quick``: N = 4
only. ``--device cuda`` (a GPU machine): one-device plans (1 x 1 x 1) over N = 1, 2, 4, 8 with and without
recomputation, written to results/plan_fidelity_gpu.md. The machine's load average is recorded with every run.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "milp_partition"]
#: name -> (factory, --input of the import, --memory per device for the planner)
MODELS = {
    "MLP": ("milp_partition.importers.models:mlp_small_test", "8x32", "4GiB"),
    "GPT": ("milp_partition.importers.models:gpt_small_test", "8x32:int64", "4GiB"),
    "ConvNet": ("milp_partition.importers.models:convnet_small_test", "8x3x32x32", "4GiB"),
}
RECOMPUTE_PREFIX = "activation recomp"
#: ``--cached-only``: write the results from the plans already run, import, solve and run nothing.
CACHED_ONLY = False


def sh(args: list[str], check: bool = True) -> int:
    print("$ milp-partition " + " ".join(args[3:]), flush=True)
    return subprocess.run(args, check=check, cwd=ROOT, stdout=subprocess.DEVNULL).returncode


def shapes(devices: int, n: int) -> list[tuple[int, int, int]]:
    """Every (stages, data, tensor) with S d t <= ``devices``, d dividing N, t a power of two."""
    out = []
    for s, d, t in itertools.product(range(1, devices + 1), range(1, devices + 1), (1, 2, 4, 8)):
        if s * d * t <= devices and n % d == 0:
            out.append((s, d, t))
    return out


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation (ties take their mean rank); NaN for fewer than 3 points or a constant side."""

    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r

    if len(xs) < 3:
        return float("nan")
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / (vx * vy) ** 0.5 if vx > 0 and vy > 0 else float("nan")


def recomputed_plan(graph: Path, plan: Path, out: Path, devices: int, memory: str, n: int) -> bool:
    """``plan`` with every layer that has a recomputation configuration (at its stage's t) switched to it, priced
    by the joint verifier on the same problem; written to ``out``. False when no layer can be recomputed."""
    from milp_partition.cli.dispatch import build_parser
    from milp_partition.cli.joint import problem_from_args, read_plan
    from milp_partition.joint.problem import JointPlan, JointStage
    from milp_partition.verifiers.joint import verify_joint

    args = build_parser().parse_args(
        ["solve", str(graph), "--problem", "joint", "--devices", str(devices), "--memory", memory, "--microbatches", str(n)]
    )
    problem = problem_from_args(args)
    base = read_plan(plan)
    stages = []
    changed = 0
    for st in base.stages:
        configs = dict(st.configs)
        for v in st.nodes:
            ids = [c.id for c in problem.node(v).configs.get(st.tensor_parallel, ())]
            rc = [c for c in ids if c.startswith(RECOMPUTE_PREFIX)]
            if rc and configs[v] != rc[0]:
                configs[v] = rc[0]
                changed += 1
        stages.append(JointStage(st.nodes, st.data_parallel, st.tensor_parallel, configs))
    if not changed:
        return False
    rc_plan = JointPlan(tuple(stages))
    rep = verify_joint(problem, rc_plan)
    if not rep.feasible:
        return False
    data = json.loads(plan.read_text())
    for q, (st, sr) in enumerate(zip(data["stages"], rep.stages)):
        st["configs"] = dict(rc_plan.stages[q].configs)
        st.update(
            time_per_sample_s=sr.time_per_sample_s, memory_bytes=sr.memory_bytes, microbatches_in_flight=sr.microbatches_in_flight
        )
    data.update(objective=rep.objective, time_per_sample=rep.objective, bound=None, gap=None, status="feasible")
    data.update(
        peak_memory_bytes=max(sr.memory_bytes for sr in rep.stages),
        loads={f"stage {q + 1}": sr.time_per_sample_s for q, sr in enumerate(rep.stages)},
        memory_bytes={f"stage {q + 1}": sr.memory_bytes for q, sr in enumerate(rep.stages)},
    )
    data["message"] = (
        "benchmarks/plan_fidelity.py: the solved plan with every recomputable layer recomputed, priced by the verifier"
    )
    out.write_text(json.dumps(data, indent=1) + "\n")
    return True


def plan_key(path: Path) -> str:
    """The plan itself (stages: nodes, degrees, configurations), to see when the free optimum is a forced plan."""
    stages = json.loads(path.read_text())["stages"]
    return json.dumps([[st["nodes"], st["data_parallel"], st["tensor_parallel"], st["configs"]] for st in stages], sort_keys=True)


def run_one(plan: Path, steps: int, fresh: bool) -> tuple[dict[str, Any], float, str] | None:
    """run.json of ``plan`` (run now unless present and not ``fresh``), the 1-minute load as it started and the
    commit it ran at; ``None`` under ``--cached-only`` when it was not run."""
    run = plan.with_name(plan.stem + "_run.json")
    meta = plan.with_name(plan.stem + "_load.json")
    if fresh or not run.exists() or not meta.exists():
        if CACHED_ONLY:
            return None
        load = os.getloadavg()[0]
        sh([*CLI, "run", str(plan), "--steps", str(steps), "-o", str(run)])
        meta.write_text(json.dumps({"load_1min": load, "commit": commit()}))
    info = json.loads(meta.read_text())
    return json.loads(run.read_text()), float(info["load_1min"]), str(info.get("commit", "not recorded"))


def commit() -> str:
    """The checkout's commit, ``+`` when milp_partition/ has uncommitted changes."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "milp_partition"], cwd=ROOT, capture_output=True, text=True).stdout
    return head + ("+" if dirty else "")


def row_of(
    model: str, n: int, shape: str, recompute: bool, free: bool, r: dict[str, Any], load: float, at: str
) -> dict[str, Any]:
    """One plan's figures from its run.json."""
    ratios = [m["predicted_bytes"] / m["measured_peak_bytes"] for m in r["memory"] if m["measured_peak_bytes"] > 0]
    return {
        "model": model,
        "microbatches": n,
        "shape": shape,
        "recompute": recompute,
        "free_optimum": free,
        "ranks": r["ranks"],
        "planner_step_s": r["planner_step_s"],
        "measured_step_s": r["measured_step_s"],
        "planner_error": (r["planner_step_s"] - r["measured_step_s"]) / r["measured_step_s"],
        "measured_over_planned": r["measured_step_s"] / r["planner_step_s"] if r["planner_step_s"] > 0 else float("nan"),
        "run_predicted_step_s": r["predicted_step_s"],
        "run_predicted_error": r["step_rel_error"],
        "loss_max_rel_diff": r["loss_max_rel_diff"],
        "memory_planned_over_held_min": min(ratios) if ratios else float("nan"),
        "memory_planned_over_held_max": max(ratios) if ratios else float("nan"),
        "load_1min": load,
        "commit": at,
    }


def recomputes(plan: Path) -> bool:
    """Whether any layer of ``plan`` is recomputed."""
    return any(
        str(c).startswith(RECOMPUTE_PREFIX) for st in json.loads(plan.read_text())["stages"] for c in st["configs"].values()
    )


def shape_name(plan: Path) -> str:
    stages = json.loads(plan.read_text())["stages"]
    degrees = {(st["data_parallel"], st["tensor_parallel"]) for st in stages}
    if len(degrees) == 1:
        d, t = degrees.pop()
        return f"{len(stages)}x{d}x{t}"
    return f"{len(stages)}: " + ",".join(f"{st['data_parallel']}x{st['tensor_parallel']}" for st in stages)


def bench_model(name: str, args: argparse.Namespace, work: Path, profile: Path | None, gpu: bool) -> list[dict[str, Any]]:
    """Every plan of one model: import, solve each shape and N, add the recomputed twin, run, one row each
    (``--cached-only``: only the plans already run). A shape without a plan leaves a ``.none`` file (listed)."""
    ref, inp, memory = MODELS[name]
    graph = work / f"{name.lower()}.json"
    if not graph.exists():
        if CACHED_ONLY:
            return []
        flags = ["--profile", str(profile)] if profile is not None else []
        sh([*CLI, "import", "torch", ref, "--input", inp, "--training", "--granularity", "layer", *flags, "--output", str(graph)])
    rows: list[dict[str, Any]] = []
    for n in args.microbatches:
        free = work / f"{name.lower()}_N{n}_free.json"
        solve = [*CLI, "solve", str(graph), "--problem", "joint", "--memory", memory, "--microbatches", str(n), "--quiet"]
        if not free.exists() and not CACHED_ONLY:
            sh([*solve, "--devices", str(args.devices), "-o", str(free)])
        seen: dict[str, dict[str, Any]] = {}
        for s, d, t in shapes(args.devices, n) if not gpu else [(1, 1, 1)]:
            plan = work / f"{name.lower()}_N{n}_{s}x{d}x{t}.json"
            none = plan.with_suffix(".none")
            if none.exists() or (CACHED_ONLY and not plan.exists()):
                continue
            if not plan.exists():
                shape = ["--stages", str(s), "--data-parallel", str(d), "--tensor-parallel", str(t)]
                if sh([*solve, "--devices", str(s * d * t), *shape, "-o", str(plan)], check=False) != 0:
                    print(f"  {name} N = {n} {s}x{d}x{t}: no plan (infeasible or not offered)", flush=True)
                    plan.unlink(missing_ok=True)
                    none.write_text("no plan: solve exited non-zero\n")
                    continue
            twin = plan.with_name(plan.stem + "_rc.json")
            has_twin = twin.exists() or (not CACHED_ONLY and recomputed_plan(graph, plan, twin, s * d * t, memory, n))
            for path in [plan, *([twin] if has_twin else [])]:
                got = run_one(path, args.steps, args.fresh)
                if got is None:
                    continue
                row = row_of(name, n, shape_name(path), recomputes(path), False, *got)
                seen[plan_key(path)] = row
                rows.append(row)
        if not free.exists():
            continue
        key = plan_key(free)
        if key in seen:
            seen[key]["free_optimum"] = True
        elif (got := run_one(free, args.steps, args.fresh)) is not None:
            rows.append(row_of(name, n, shape_name(free), recomputes(free), True, *got))
    return rows


def no_plan(work: Path) -> list[str]:
    """The shapes ``solve`` found no plan for (their ``.none`` files)."""
    return sorted(p.stem for p in work.glob("*.none"))


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:+.0f}%"


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Per model and over all: the planner's error (median, largest), rank correlation, free optimum over fastest,
    memory planned over held."""
    lines = [
        "| model | plans | median abs error | largest error | measured / planned (median) | Spearman (all N) | Spearman per N | free optimum / fastest "
        "(per N) | planned / held memory (min, max over ranks) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    groups = {m: [r for r in rows if r["model"] == m] for m in dict.fromkeys(r["model"] for r in rows)}
    for model, mine in [*groups.items(), ("all", rows)]:
        errs = [r["planner_error"] for r in mine]
        worst = max(errs, key=abs)
        per_n = []
        ratio = []
        for n in sorted({r["microbatches"] for r in mine}):
            at = [r for r in mine if r["microbatches"] == n]
            rho = spearman([r["planner_step_s"] for r in at], [r["measured_step_s"] for r in at])
            per_n.append(f"N={n}: {rho:.2f}" if rho == rho else f"N={n}: -")
            free = [r for r in at if r["free_optimum"]]
            if free and model != "all":
                ratio.append(f"N={n}: {free[0]['measured_step_s'] / min(r['measured_step_s'] for r in at):.2f}")
        rho_all = spearman([r["planner_step_s"] for r in mine], [r["measured_step_s"] for r in mine])
        lo = min(r["memory_planned_over_held_min"] for r in mine)
        hi = max(r["memory_planned_over_held_max"] for r in mine)
        lines.append(
            f"| {model} | {len(mine)} | {100 * statistics.median(abs(e) for e in errs):.0f}% | {_pct(worst)} | "
            f"{statistics.median(r['measured_over_planned'] for r in mine):.3g} | "
            f"{rho_all:.2f} | {'; '.join(per_n) if model != 'all' else '-'} | {'; '.join(ratio) or '-'} | {lo:.2f}, {hi:.2f} |"
        )
    return lines


def chart(rows: list[dict[str, Any]], path: Path) -> bool:
    """Planned against measured step, one point per plan (recomputed plans hollow), the diagonal drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 5))
    for (model, marker), color in zip(zip(dict.fromkeys(r["model"] for r in rows), "os^D"), ("C0", "C1", "C2", "C3")):
        for rc in (False, True):
            mine = [r for r in rows if r["model"] == model and r["recompute"] is rc]
            if mine:
                ax.scatter(
                    [r["planner_step_s"] for r in mine],
                    [r["measured_step_s"] for r in mine],
                    marker=marker,
                    facecolors="none" if rc else color,
                    edgecolors=color,
                    label=f"{model}{' (recomputed)' if rc else ''}",
                )
        for r in rows:
            if r["model"] == model and r["free_optimum"]:
                ax.annotate("free opt.", (r["planner_step_s"], r["measured_step_s"]), fontsize=7)
    lo = min(min(r["planner_step_s"], r["measured_step_s"]) for r in rows)
    hi = max(max(r["planner_step_s"], r["measured_step_s"]) for r in rows)
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="measured = planned")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("planner's step (s): objective x N")
    ax.set_ylabel("measured step (s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(
    rows: list[dict[str, Any]], args: argparse.Namespace, gpu: bool, load_start: tuple[float, ...], missing: list[str]
) -> None:
    """results/plan_fidelity[_gpu].{csv,md,png} from the rows so far."""
    name = "plan_fidelity_gpu" if gpu else "plan_fidelity"
    out = ROOT / "results"
    with open(out / f"{name}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    commits = ", ".join(f"`{c}`" for c in dict.fromkeys(r["commit"] for r in rows))
    cmd = " ".join(sys.argv[1:])
    lines = [
        f"<!-- written by benchmarks/plan_fidelity.py {cmd}; do not edit -->",
        f"# Plan fidelity: the planner's step against the measured step ({'CUDA, nccl' if gpu else 'CPU, gloo'})",
        "",
        f"Planned and run at commit {commits} (`+`: with uncommitted changes under milp_partition/); "
        f"torch ranks {'one per GPU' if gpu else 'on the CPU, one thread each'}, up to {args.devices} device"
        f"{'s' if args.devices > 1 else ''}; N = {', '.join(map(str, args.microbatches))} micro-batches of one sample; "
        f"{args.steps} steps a run (the first is warm-up; the median of the rest, the slowest rank). Planned: run.json's "
        "`planner_step_s` (the joint planner's objective, time per sample, x N; for a recomputed plan the verifier's). "
        "Error = (planned - measured) / measured. Memory: the planner's stage memory over what the rank held ("
        + ("`max_memory_allocated`" if gpu else "its tensors: weights, gradients, optimizer state, peak saved activations")
        + f"). Machine: {os.cpu_count()} cores; "
        + (
            "written with --cached-only from runs made earlier; "
            if CACHED_ONLY
            else f"load average (1, 5, 15 min) {', '.join(f'{x:.1f}' for x in load_start)} at the start and "
            f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; "
        )
        + "the load column is the 1-minute load average as each run started (more runnable processes than cores "
        "whenever it is above the cores). On a machine shared with other work these numbers are provisional: re-run "
        "on idle cores.",
        "",
        *summary(rows),
        "",
        "Shapes without a plan (the planner found none, or does not offer the tensor-parallel degree): "
        + (", ".join(f"`{m}`" for m in missing) or "none")
        + ".",
        "",
        "| model | N | shape (S x d x t) | recomputed | free optimum | ranks | planned step (s) | measured step (s) | "
        "error | measured / planned | run's predicted step (s) | loss max rel diff | planned / held memory | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['microbatches']} | {r['shape']} | {'yes' if r['recompute'] else 'no'} | "
            f"{'yes' if r['free_optimum'] else ''} | {r['ranks']} | {r['planner_step_s']:.4g} | {r['measured_step_s']:.4g} | "
            f"{_pct(r['planner_error'])} | {r['measured_over_planned']:.3g} | {r['run_predicted_step_s']:.4g} | {r['loss_max_rel_diff']:.2g} | "
            f"{r['memory_planned_over_held_min']:.2f}-{r['memory_planned_over_held_max']:.2f} | {r['load_1min']:.1f} |"
        )
    if chart(rows, out / f"{name}.png"):
        lines += ["", f"![planned against measured]({name}.png)"]
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote results/{name}.md", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", type=int, default=2, help="devices per plan at most (default 2)")
    ap.add_argument("--microbatches", type=int, nargs="+", default=[2, 4, 8], help="micro-batch counts N (default 2 4 8)")
    ap.add_argument("--steps", type=int, default=4, help="steps a run (default 4)")
    ap.add_argument("--models", nargs="*", help="only the models whose names contain one of these words")
    ap.add_argument("--quick", action="store_true", help="N = 4 only")
    ap.add_argument("--fresh", action="store_true", help="run every plan again, even if its run.json is there")
    ap.add_argument("--cached-only", action="store_true", help="write the results from the plans already run (nothing is run)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: one-device plans on a GPU")
    ap.add_argument(
        "--profile",
        help="the device profile the models are imported with (default: on the CPU scratch/cpu.json, calibrated here "
        "if missing; on a GPU the import's default unless given, e.g. a profile from 'calibrate' on that GPU)",
    )
    ap.add_argument("--work", default="scratch/plan_fidelity")
    args = ap.parse_args()
    gpu = args.device == "cuda"
    global CACHED_ONLY
    CACHED_ONLY = args.cached_only
    if gpu:
        import torch

        if not torch.cuda.is_available():
            ap.error("--device cuda needs a GPU")
        args.devices = 1
        args.microbatches = [1, 2, 4, 8]
    if args.quick:
        args.microbatches = [4]
    work = ROOT / args.work / ("cuda" if gpu else f"cpu{args.devices}")
    work.mkdir(parents=True, exist_ok=True)
    profile = ROOT / args.profile if args.profile else None
    if not gpu:
        profile = profile or ROOT / "scratch" / "cpu.json"
        if not profile.exists():
            sh([*CLI, "calibrate", "--backend", "numpy", "--quick", "--no-progress", "-o", str(profile)])
    models = [m for m in MODELS if not args.models or any(w.lower() in m.lower() for w in args.models)]
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for model in models:
        rows += bench_model(model, args, work, profile, gpu)
        if rows:
            write(rows, args, gpu, load_start, no_plan(work))  # after each model: a cut-short run keeps the models done
    return 0


if __name__ == "__main__":
    sys.exit(main())
