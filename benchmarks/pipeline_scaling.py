"""Pipeline partitioning of large generated graphs: the time budget and the memory of the heuristics-only solve.

Writes ``results/pipeline_scaling.md`` and ``.csv``.  For each size, a seeded Inception-like layer graph
(:func:`milp_partition.pipeline.generators.inception_like`, 4 branches, depth <= 3) on 4 accelerators is solved
with ``--solver none`` under a time limit, each in its own process so that its peak memory (max RSS) is its own.
Run from the repository root::

    python benchmarks/pipeline_scaling.py [--blocks 110 1100 11200] [--time-limit 60]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = "benchmarks/pipeline_scaling.py"

_CHILD = r"""
import json, resource, sys, time
from milp_partition.cluster import homogeneous_cluster
from milp_partition.pipeline.generators import InceptionLikeSettings, inception_like
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
blocks, limit = int(sys.argv[1]), float(sys.argv[2])
graph = inception_like(0, InceptionLikeSettings(blocks=blocks))
problem = PipelineProblem(graph, homogeneous_cluster(4, None), PipelineSettings(), source=graph.name)
t0 = time.monotonic()
r = solve_pipeline(problem, SolveSettings(solver="none", time_limit_s=limit))
print(json.dumps({
    "nodes": len(graph.nodes), "edges": len(graph.edges), "status": r.status, "objective": r.objective,
    "solve_s": round(time.monotonic() - t0, 2), "best": r.message,
    "heuristics": {h.name: [h.objective, round(h.seconds, 2), h.message[:120]] for h in r.heuristics},
    "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[110, 1100, 11200], help="blocks per graph (about 9 nodes each)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--out-dir", type=Path, default=REPO / "results")
    args = ap.parse_args(argv)
    rows = []
    for blocks in args.blocks:
        load0 = os.getloadavg()[0]
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(blocks), str(args.time_limit)], capture_output=True, text=True, cwd=REPO
        )
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["blocks"], row["load_before"] = blocks, round(load0, 1)
        rows.append(row)
        print(f"{blocks} blocks: {row['nodes']} nodes, {row['status']} {row['objective']} in {row['solve_s']} s, "
              f"{row['max_rss_mb']} MB", file=sys.stderr)  # fmt: skip
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with open(args.out_dir / "pipeline_scaling.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["nodes", "edges", "status", "objective", "solve_s", "max_rss_mb", "load_before", "heuristics"])
        for r in rows:
            w.writerow([r["nodes"], r["edges"], r["status"], r["objective"], r["solve_s"], r["max_rss_mb"], r["load_before"],
                        json.dumps(r["heuristics"])])  # fmt: skip
    lines = [
        "# Pipeline partitioning of large generated graphs (heuristics only)",
        "",
        f"Written by `{SCRIPT}` (`python {SCRIPT} {' '.join(argv if argv is not None else sys.argv[1:])}`); do not edit.",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other work (1-minute load average in the table), "
        f"CPython {platform.python_version()}. Inception-like layer graphs, 4 accelerators without a memory limit, "
        f"`--solver none`, time limit {args.time_limit:g} s for the whole solve. Peak memory is the process's max RSS.",
        "",
        "| nodes | edges | status | max-load | best from | solve s | chain DP | ideal DP | balanced split | max RSS MB | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        h = r["heuristics"]

        def cell(name: str, h: dict = h) -> str:
            if name not in h:
                return "not run (a DP answered)"
            value, secs, msg = h[name]
            if value is None:
                return "not run (too large)" if "not run" in msg else ("stopped (time)" if "stopped" in msg else "no split")
            return f"{value:.6g} ({secs} s)"

        lines.append(
            f"| {r['nodes']} | {r['edges']} | {r['status']} | {r['objective']:.6g} | {r['best'].replace('best solution from ', '')} "
            f"| {r['solve_s']} | {cell('chain_dp')} | {cell('ideal_dp')} | {cell('balanced_split')} | {r['max_rss_mb']} "
            f"| {r['load_before']} |"
        )
    lines += [
        "",
        "The DPs' tables are quadratic in the graph's units, so past 5,000 units they are not built (the DPs say so at "
        "once) and the balanced split of one topological order answers (`heuristics/pipeline_split.py`); below that they "
        "stop at half the time limit. The solve's time also counts verifying each answer (O(N + E) per device).",
    ]
    (args.out_dir / "pipeline_scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
