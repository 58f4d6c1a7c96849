"""Benchmark of exact operator placement and scheduling on Moirai's five instances.

Writes ``results/placement.md`` and ``results/placement.csv`` (and keeps every
run in ``results/placement_runs.json`` so that one instance can be re-run with
``--only`` and the table re-rendered).  For every instance: tasks, edges, devices,
the reference best makespan and bound (``shared/benchmarks/placement/reference.json``),
each of our lower bounds, the exact chain's makespan (the simulator's), bound,
gap, status and time, and each heuristic's makespan, its gap to our best bound and
its time.  Run from the repository root::

    python benchmarks/placement_bench.py [--time-limit 600] [--threads 2] [--only GoogLeNet]
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from milp_partition.backends import relative_gap  # noqa: E402
from milp_partition.io.placement_instance import read_placement_instance  # noqa: E402
from milp_partition.placement.solve import PlacementSolveSettings, solve_placement  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks" / "placement"
FILES = ["example-1.json", "yolov5x.json", "GoogLeNet.json", "inceptionv4.json", "transformer.json"]
RUNS = REPO / "results" / "placement_runs.json"
BOUND_KINDS = ("critical_path", "device_path", "fractional_load", "transfer_flow", "decomposition", "main_line")


def run(name: str, args: argparse.Namespace) -> dict:
    problem = read_placement_instance(SHARED / name)
    t0 = time.monotonic()
    result = solve_placement(
        problem, PlacementSolveSettings(time_limit_s=args.time_limit, threads=args.threads, progress_interval_s=args.progress)
    )
    wall = time.monotonic() - t0
    return {
        "file": name,
        "tasks": problem.num_tasks,
        "edges": problem.num_edges,
        "devices": problem.num_devices,
        "status": result.status,
        "makespan": result.objective,
        "bound": result.bound,
        "gap": result.gap,
        "seconds": wall,
        "time_limit_s": args.time_limit,
        "threads": args.threads,
        "bounds": result.solver_notes.get("bounds", {}),
        "decomposition": result.solver_notes.get("decomposition"),
        "warm_start": result.warm_start.get("source") if result.warm_start else None,
        "message": result.message,
        "heuristics": [{"name": h.name, "makespan": h.objective, "seconds": h.seconds} for h in result.heuristics],
    }


def run_cbc(name: str, time_limit_s: float) -> dict:
    """The disjunctive MILP with CBC (small instances only)."""
    problem = read_placement_instance(SHARED / name)
    t0 = time.monotonic()
    r = solve_placement(problem, PlacementSolveSettings(solver="cbc", time_limit_s=time_limit_s, threads=2))
    return {
        "file": name,
        "status": r.status,
        "makespan": r.objective,
        "bound": r.bound,
        "seconds": time.monotonic() - t0,
        "variables_constraints": r.solver_notes.get("model_size"),
    }


def _f(x: float | None, digits: int = 7) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _pct(x: float | None) -> str:
    if x is None:
        return "-"
    return "0%" if x < 5e-9 else f"{100 * x:.2f}%"


def render(runs: dict[str, dict]) -> tuple[str, list[dict]]:
    reference = {r["file"]: r for r in json.loads((SHARED / "reference.json").read_text())}
    lines = [
        "# Placement: exact makespan, bounds and heuristics on Moirai's instances",
        "",
        "Written by `benchmarks/placement_bench.py` (run from the repository root: "
        "`python benchmarks/placement_bench.py --time-limit 600 --threads 2`). "
        f"Machine: {platform.machine()}, Python {platform.python_version()}, 2 cores shared with other work, so times are noisy.",
        "",
        "Instances: `../shared/benchmarks/placement/` (Moirai sample data, `placement-instance/1`), static memory, no link contention "
        "(as the reference). Makespans are the independent simulator's (`milp_partition/verify_placement.py`); bounds are proven "
        "lower bounds in the instance's unit (ms for the networks). Gap = (makespan - bound) / makespan. The reference is a plain "
        "CP-SAT model, 300 s, 2 workers (`reference.json`).",
        "",
        "## Exact chain",
        "",
        "| instance | tasks/edges/devices | reference best | reference bound | "
        + " | ".join(k.replace("_", " ") for k in BOUND_KINDS)
        + " | our makespan | our bound | gap | status | time (s) | limit (s) |",
        "|---|---|---|---|" + "---|" * len(BOUND_KINDS) + "---|---|---|---|---|---|",
    ]
    rows: list[dict] = []
    for name in FILES:
        r = runs.get(name)
        if r is None:
            continue
        ref = reference.get(name, {})
        b = r["bounds"]
        lines.append(
            f"| {name.removesuffix('.json')} | {r['tasks']}/{r['edges']}/{r['devices']} | {_f(ref.get('best_makespan'))} | "
            f"{_f(ref.get('lower_bound'))} | " + " | ".join(_f(b.get(k)) for k in BOUND_KINDS) + " | "
            f"{_f(r['makespan'])} | {_f(r['bound'])} | {_pct(r['gap'])} | {r['status']} | "
            f"{r['seconds']:.1f} | {r['time_limit_s']:g} |"
        )
        rows.append(
            {k: r[k] for k in ("file", "tasks", "edges", "devices", "status", "makespan", "bound", "gap", "seconds")}
            | {f"bound_{k}": b.get(k) for k in BOUND_KINDS}
            | {"reference_best": ref.get("best_makespan"), "reference_bound": ref.get("lower_bound")}
        )
    names: list[str] = []
    for r in (runs[f] for f in FILES if f in runs):
        names += [h["name"] for h in r["heuristics"] if h["name"] not in names]
    lines += [
        "",
        "## Heuristics (makespan, gap to our best bound, time)",
        "",
        "| instance | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for name in FILES:
        r = runs.get(name)
        if r is None:
            continue
        cells = []
        by_name = {h["name"]: h for h in r["heuristics"]}
        for h in names:
            x = by_name.get(h)
            if x is None or x["makespan"] is None:
                cells.append("-")
                continue
            gap = relative_gap(x["makespan"], r["bound"]) if r["bound"] is not None else None
            cells.append(f"{_f(x['makespan'])} ({_pct(gap)}, {x['seconds']:.2f} s)")
        lines.append(f"| {name.removesuffix('.json')} | " + " | ".join(cells) + " |")
    cbc = runs.get("cbc")
    if cbc:
        lines += [
            "",
            f"CBC (disjunctive big-M model, `--solver cbc`): {cbc['file'].removesuffix('.json')} {cbc['status']}, makespan "
            f"{_f(cbc['makespan'])}, bound {_f(cbc['bound'])}, {cbc['seconds']:.1f} s. The disjunctive model has one order "
            "variable per pair of tasks no path orders, so it is meant for small instances only; the networks are not run with it.",
        ]
    lines += [
        "",
        "Scaling of the heuristics to 1k-100k nodes: [placement_scaling.md](placement_scaling.md).",
        "",
        "## How the bounds are obtained",
        "",
        "- critical path: longest path at each task's fastest device, transfers dropped.",
        "- device path: the recursion f(j, b) = d_jb + max over predecessors of min over the predecessor's device a of "
        "f(i, a) + comm[a][b]; keeps device choices and transfer times along paths (`milp_partition/placement_bounds.py`).",
        "- fractional load: LP min T over fractional assignments with every device's busy time <= T (GLOP).",
        "- decomposition: graphs that split at bottleneck tasks (every other task an ancestor or a descendant) and that a "
        "10 s solve of the whole model does not prove (here GoogLeNet and Inception-v4; example-1 and yolov5x end in that "
        "first solve): each segment is solved for every device pair of its two ends and a recursion over the segments gives "
        "a bound (from the segments' bounds) and a schedule (from their schedules); exact when memory does not bind "
        "(`milp_partition/placement_decompose.py`). The transformer has no useful bottleneck (one segment of 1,359 tasks).",
        "- transfer flow: the fractional load LP plus completion times along every edge, where each edge pays its transfer "
        "for the part of its endpoints' fractional devices that differ (a joint distribution per edge); the value reported "
        "is recomputed from GLOP's duals by weak duality (`transfer_flow` in `milp_partition/placement_bounds.py`).",
        "- main line: the optimum of the problem on a subset of the tasks (with the edges between them) is at most the "
        "whole's, so a bound on a subgraph bounds the whole; for graphs whose whole decomposition is not useful, the tasks "
        "unordered with few others are kept until they split into small segments, and the decomposition's bound on them is "
        "used (`milp_partition/placement_subgraph.py`).",
        "- the exact chain's bound is the best of these and CP-SAT's own bound on the interval model "
        "(`formulations/placement.py`), which carries them as redundant constraints.",
        "",
        "## Notes",
        "",
        "- CP-SAT parameters: the defaults. On GoogLeNet's whole model (60 s, 2 workers, measured once while developing) "
        "`optimize_with_lb_tree_search` and `use_objective_lb_search` raised CP-SAT's bound a little (0.903 -> 0.912 and "
        "0.937) but found worse incumbents (1.324 and 1.317 against 1.246); none came near a proof, which the decomposition "
        "gives in under a minute. On the transformer (120 s) `optimize_with_lb_tree_search` left the bound at 10.237.",
        "- The transformer has no useful bottleneck as a whole: a side branch of 358 tasks (4.1 ms on d3) runs beside the "
        "rest. Without it, the other 1,016 tasks split at 161 bottleneck tasks into segments of at most 66 tasks, and the "
        "decomposition's bound on those 1,016 tasks, 17.209, bounds the whole (main line above). The whole model then runs "
        "from heft-iter's 18.8551. The bound ignores the side branch's work, and the 66-task segments are not all proven "
        "(the best schedule of the 1,016 tasks alone is 17.36), so part of the remaining gap is the bound's. Tried and "
        "dropped: time windows per device at a trial makespan (they prune almost nothing: every task keeps a path through "
        "d0 or d3), a windowed load LP, CP-SAT without device no-overlap (bound 10.11 after 60 s), and a time-window "
        "neighbourhood search around the incumbent (nothing better than heft-iter in 6 rounds).",
    ]
    return "\n".join(lines) + "\n", rows


def write_chart(runs: dict[str, dict]) -> str | None:
    """``results/placement_bounds.png``: per instance, makespans and bounds (ours, reference) over our makespan."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no chart: matplotlib is not installed (the plot extra)", file=sys.stderr)
        return None
    reference = {r["file"]: r for r in json.loads((SHARED / "reference.json").read_text())}
    names = [n for n in FILES if n in runs and runs[n].get("makespan")]
    series = {
        "our makespan": [1.0 for n in names],
        "our bound": [(runs[n]["bound"] or 0) / runs[n]["makespan"] for n in names],
        "reference makespan": [(reference.get(n, {}).get("best_makespan") or 0) / runs[n]["makespan"] for n in names],
        "reference bound": [(reference.get(n, {}).get("lower_bound") or 0) / runs[n]["makespan"] for n in names],
    }
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.2
    for j, (label, values) in enumerate(series.items()):
        ax.bar([i + (j - 1.5) * width for i in range(len(names))], values, width=width, label=label)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([n.removesuffix(".json") for n in names])
    ax.set_ylabel("over our makespan")
    ax.set_title("Moirai instances: makespans and proven bounds (1 = our makespan; a bound at 1 is a proof)")
    ax.set_ylim(0, 1.45)
    ax.legend(fontsize=8, ncol=4, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(REPO / "results" / "placement_bounds.png", dpi=110)
    plt.close(fig)
    return "placement_bounds.png"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", action="append", help="instance name(s) to (re-)run, e.g. GoogLeNet")
    ap.add_argument("--progress", type=float, default=None, help="progress line period on stderr (default: silent)")
    ap.add_argument("--render-only", action="store_true", help="re-write the tables from results/placement_runs.json")
    args = ap.parse_args()
    runs: dict[str, dict] = json.loads(RUNS.read_text()) if RUNS.exists() else {}
    if not args.render_only:
        for name in FILES:
            if args.only and name.removesuffix(".json") not in args.only:
                continue
            print(f"{name} ...", file=sys.stderr, flush=True)
            runs[name] = run(name, args)
            r = runs[name]
            print(
                f"  {r['status']} makespan {r['makespan']} bound {r['bound']} gap {r['gap']} in {r['seconds']:.1f}s",
                file=sys.stderr,
            )
            RUNS.write_text(json.dumps(runs, indent=1) + "\n")
    if not args.render_only and (not args.only or "example-1" in args.only):
        runs["cbc"] = run_cbc("example-1.json", 120.0)
        RUNS.write_text(json.dumps(runs, indent=1) + "\n")
    text, rows = render(runs)
    chart = write_chart(runs)
    if chart:
        text += f"\n## Chart\n\nMakespan and proven bound of each instance, ours and the reference's, over our makespan.\n\n![{chart}]({chart})\n"
    (REPO / "results" / "placement.md").write_text(text)
    with open(REPO / "results" / "placement.csv", "w", newline="") as fh:
        if rows:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print(text)


if __name__ == "__main__":
    main()
