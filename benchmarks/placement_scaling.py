"""Scaling of the placement heuristics on generated graphs, and their makespans on Moirai's instances.

Writes ``results/placement_scaling.md`` and ``results/placement_scaling.csv``:

* each heuristic (HEFT, m-TOPO, m-ETF, ParDNN-style) on generated layered,
  transformer-like and inception-like graphs of 1,000, 10,000 and 100,000 tasks
  (4 heterogeneous devices, memory slack 1.5, seed 0): wall time of the heuristic
  alone (one run each, single-threaded Python) and the verifier's makespan;
* the time to generate a 200,000-task instance of each kind;
* each heuristic on the five Moirai instances against ``reference.json``'s best
  makespan.

Run: ``python benchmarks/placement_scaling.py [--sizes 1000,10000,100000] [--kinds layered,transformer,inception]``.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS  # noqa: E402
from milp_partition.io.placement_instance import read_placement_instance  # noqa: E402
from milp_partition.placement.generators import PlacementGeneratorSettings, generate_placement_problem  # noqa: E402
from milp_partition.verifiers.placement import verify_placement  # noqa: E402

MOIRAI = REPO.parent / "shared" / "benchmarks" / "placement"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--kinds", default="layered,transformer,inception")
    ap.add_argument("--output-dir", type=Path, default=REPO / "results")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    kinds = args.kinds.split(",")
    rows: list[dict[str, object]] = []
    md = [
        "<!-- written by benchmarks/placement_scaling.py -->",
        "",
        "# Placement heuristics: scaling and Moirai instances",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared with other work), "
        f"Python {platform.python_version()}; one run per cell, wall time of the heuristic alone (the verifier's replay "
        "not included). Makespans are the verifier's simulator's (seconds for generated graphs).",
        "",
        "## Generated graphs (4 heterogeneous devices, memory slack 1.5, seed 0)",
        "",
        "| graph | tasks | edges | heuristic | seconds | makespan | feasible |",
        "|---|---|---|---|---|---|---|",
    ]
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
                md.append(
                    f"| {kind} | {n} | {problem.num_edges} | {name} | {seconds:.2f} | {report.makespan:.6g} | {report.feasible} |"
                )
                print(md[-1], flush=True)
    md += ["", "## Generating 200,000 tasks", "", "| graph | edges | seconds |", "|---|---|---|"]
    for kind in kinds:
        t0 = time.perf_counter()
        problem = generate_placement_problem(PlacementGeneratorSettings(kind=kind, num_tasks=200_000, seed=0))  # type: ignore[arg-type]
        seconds = time.perf_counter() - t0
        rows.append(
            dict(section="generate", instance=f"{kind}-200000", tasks=200_000, edges=problem.num_edges, heuristic="",
                 seconds=round(seconds, 3), makespan="", feasible="", reference="")
        )  # fmt: skip
        md.append(f"| {kind} | {problem.num_edges} | {seconds:.2f} |")
        print(md[-1], flush=True)
        del problem
    reference = {r["file"]: r for r in json.loads((MOIRAI / "reference.json").read_text())}
    md += [
        "",
        "## Moirai instances (no link contention, static memory)",
        "",
        "Reference: `reference.json`'s best makespan (plain CP-SAT, 300 s, 2 workers).",
        "",
        "| instance | tasks | heuristic | seconds | makespan | reference best | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for file, ref in reference.items():
        problem = read_placement_instance(MOIRAI / file)
        for name, fn in PLACEMENT_HEURISTICS.items():
            t0 = time.perf_counter()
            sol = fn(problem)
            seconds = time.perf_counter() - t0
            report = verify_placement(problem, sol)
            best = float(ref["best_makespan"])
            rows.append(
                dict(section="moirai", instance=Path(file).stem, tasks=problem.num_tasks, edges=problem.num_edges,
                     heuristic=name, seconds=round(seconds, 4), makespan=report.makespan, feasible=report.feasible,
                     reference=best)
            )  # fmt: skip
            md.append(
                f"| {Path(file).stem} | {problem.num_tasks} | {name} | {seconds:.3f} | {report.makespan:.6g} | {best:.6g} | "
                f"{report.makespan / best:.3f} |"
            )
            print(md[-1], flush=True)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "placement_scaling.md").write_text("\n".join(md) + "\n")
    with (args.output_dir / "placement_scaling.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
