"""Scaling of the placement heuristics on generated graphs, and their makespans on Moirai's instances.

Writes ``results/placement_scaling.md`` and ``results/placement_scaling.csv``:

* each heuristic (HEFT, m-TOPO, m-ETF, ParDNN-style) on generated layered,
  transformer-like and inception-like graphs of 1,000, 10,000 and 100,000 tasks
  (4 heterogeneous devices, memory slack 1.5, seed 0): wall time of the heuristic
  alone (one run each, single-threaded Python) and the verifier's makespan;
* the time to generate a 200,000-task instance of each kind;
* each heuristic on the five Moirai instances against ``reference.json``'s best
  makespan.

and the chart ``results/placement_scaling.png`` (seconds against tasks; makespan against the
reference on Moirai's instances).

Run: ``python benchmarks/placement_scaling.py [--sizes 1000,10000,100000] [--kinds layered,transformer,inception]``;
``--plot-only`` re-renders the Markdown and the chart from the CSV without running anything.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_charts import pyplot, read_csv, save  # noqa: E402
from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS  # noqa: E402

from milp_partition.io.placement_instance import read_placement_instance  # noqa: E402
from milp_partition.placement.generators import PlacementGeneratorSettings, generate_placement_problem  # noqa: E402
from milp_partition.verifiers.placement import verify_placement  # noqa: E402

MOIRAI = REPO.parent / "shared" / "benchmarks" / "placement"


def measure(sizes: list[int], kinds: list[str]) -> list[dict[str, object]]:
    """Run every heuristic on the generated graphs and Moirai's instances; time the 200,000-task generation."""
    rows: list[dict[str, object]] = []
    for kind in kinds:
        for n in sizes:
            problem = generate_placement_problem(PlacementGeneratorSettings(kind=kind, num_tasks=n, seed=0))  # type: ignore[arg-type]
            _ = problem.succ, problem.pred, problem.topological_order, problem.occupies_device  # shared, cached
            for name, fn in PLACEMENT_HEURISTICS.items():
                t0 = time.perf_counter()
                sol = fn(problem)
                seconds = time.perf_counter() - t0
                report = verify_placement(problem, sol)
                rows.append(
                    dict(section="scaling", instance=f"{kind}-{n}", tasks=n, edges=problem.num_edges, heuristic=name,
                         seconds=round(seconds, 3), makespan=report.makespan, feasible=report.feasible, reference="")
                )  # fmt: skip
                print(rows[-1], flush=True)
    for kind in kinds:
        t0 = time.perf_counter()
        problem = generate_placement_problem(PlacementGeneratorSettings(kind=kind, num_tasks=200_000, seed=0))  # type: ignore[arg-type]
        seconds = time.perf_counter() - t0
        rows.append(
            dict(section="generate", instance=f"{kind}-200000", tasks=200_000, edges=problem.num_edges, heuristic="",
                 seconds=round(seconds, 3), makespan="", feasible="", reference="")
        )  # fmt: skip
        print(rows[-1], flush=True)
        del problem
    reference = {r["file"]: r for r in json.loads((MOIRAI / "reference.json").read_text())}
    for file, ref in reference.items():
        problem = read_placement_instance(MOIRAI / file)
        for name, fn in PLACEMENT_HEURISTICS.items():
            t0 = time.perf_counter()
            sol = fn(problem)
            seconds = time.perf_counter() - t0
            report = verify_placement(problem, sol)
            rows.append(
                dict(section="moirai", instance=Path(file).stem, tasks=problem.num_tasks, edges=problem.num_edges,
                     heuristic=name, seconds=round(seconds, 4), makespan=report.makespan, feasible=report.feasible,
                     reference=float(ref["best_makespan"]))
            )  # fmt: skip
            print(rows[-1], flush=True)
    return rows


def chart(rows: list[dict[str, Any]]) -> Any:
    """Left: each heuristic's seconds against tasks (log-log, a line per heuristic and graph kind); right: makespan / reference on Moirai's instances."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5))
    cmap = plt.get_cmap("tab10")
    scaling = [r for r in rows if r["section"] == "scaling"]
    heuristics = list(dict.fromkeys(r["heuristic"] for r in scaling))
    kinds = list(dict.fromkeys(str(r["instance"]).rsplit("-", 1)[0] for r in scaling))
    markers = "os^dv"
    for j, h in enumerate(heuristics):
        for i, kind in enumerate(kinds):
            pts = sorted(
                (r["tasks"], max(float(r["seconds"]), 1e-3))
                for r in scaling
                if r["heuristic"] == h and str(r["instance"]).rsplit("-", 1)[0] == kind
            )
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], marker=markers[i % len(markers)], color=cmap(j % 10),
                     label=h if i == 0 else None, alpha=0.8)  # fmt: skip
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("tasks")
    ax1.set_ylabel("seconds (heuristic alone)")
    kinds_text = ", ".join(f"{markers[i % len(markers)]} {k}" for i, k in enumerate(kinds))
    ax1.set_title(f"generated graphs, 4 devices ({kinds_text})", fontsize=10)
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    moirai = [r for r in rows if r["section"] == "moirai"]
    instances = list(dict.fromkeys(r["instance"] for r in moirai))
    width = 0.8 / max(1, len(heuristics))
    for j, h in enumerate(heuristics):
        xs, hs = [], []
        for i, inst in enumerate(instances):
            r = next((r for r in moirai if r["instance"] == inst and r["heuristic"] == h), None)
            if r is not None and r["feasible"] and r["reference"]:
                xs.append(i + (j - (len(heuristics) - 1) / 2) * width)
                hs.append(float(r["makespan"]) / float(r["reference"]))
        ax2.bar(xs, hs, width=width, color=cmap(j % 10), label=h)
    ax2.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax2.set_xticks(range(len(instances)))
    ax2.set_xticklabels(instances, rotation=20)
    ax2.set_ylabel("makespan / reference best")
    ax2.set_title("Moirai instances: makespan against reference.json's best (dashed: 1)", fontsize=10)
    ax2.grid(axis="y", alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


def render(rows: list[dict[str, Any]], charts: list[str], note: str = "") -> str:
    """The Markdown report of ``rows`` with the chart files embedded."""
    md = [
        "<!-- written by benchmarks/placement_scaling.py -->",
        "",
        "# Placement heuristics: scaling and Moirai instances",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared with other work), "
        f"Python {platform.python_version()}; one run per cell, wall time of the heuristic alone (the verifier's replay "
        "not included). Makespans are the verifier's simulator's (seconds for generated graphs).",
        "",
        *([note, ""] if note else []),
        *[f"![{c}]({c})\n" for c in charts],
        "## Generated graphs (4 heterogeneous devices, memory slack 1.5, seed 0)",
        "",
        "| graph | tasks | edges | heuristic | seconds | makespan | feasible |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["section"] == "scaling":
            kind = str(r["instance"]).rsplit("-", 1)[0]
            md.append(
                f"| {kind} | {r['tasks']} | {r['edges']} | {r['heuristic']} | {float(r['seconds']):.2f} | "
                f"{float(r['makespan']):.6g} | {r['feasible']} |"
            )
    md += ["", "## Generating 200,000 tasks", "", "| graph | edges | seconds |", "|---|---|---|"]
    for r in rows:
        if r["section"] == "generate":
            md.append(f"| {str(r['instance']).rsplit('-', 1)[0]} | {r['edges']} | {float(r['seconds']):.2f} |")
    md += [
        "",
        "## Moirai instances (no link contention, static memory)",
        "",
        "Reference: `reference.json`'s best makespan (plain CP-SAT, 300 s, 2 workers).",
        "",
        "| instance | tasks | heuristic | seconds | makespan | reference best | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["section"] == "moirai":
            best = float(r["reference"])
            md.append(
                f"| {r['instance']} | {r['tasks']} | {r['heuristic']} | {float(r['seconds']):.3f} | {float(r['makespan']):.6g} | "
                f"{best:.6g} | {float(r['makespan']) / best:.3f} |"
            )
    return "\n".join(md) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--kinds", default="layered,transformer,inception")
    ap.add_argument("--output-dir", type=Path, default=REPO / "results")
    ap.add_argument("--plot-only", action="store_true", help="re-render the Markdown and the chart from the CSV; run nothing")
    args = ap.parse_args()
    out: Path = args.output_dir
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "placement_scaling.csv"
    note = ""
    if args.plot_only:
        rows = read_csv(csv_path)
        note = f"Re-rendered from `{csv_path.name}` by `--plot-only` (nothing ran; the machine line is the renderer's)."
    else:
        rows = measure([int(x) for x in args.sizes.split(",")], args.kinds.split(","))
        with csv_path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    png = save(chart(rows), out / "placement_scaling.png")
    (out / "placement_scaling.md").write_text(render(rows, [png], note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
