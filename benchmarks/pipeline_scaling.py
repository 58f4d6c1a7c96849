"""Pipeline partitioning of large generated graphs: the time budget and the memory of the heuristics-only solve.

Writes ``results/pipeline_scaling.md`` and ``.csv``.  For each size, a seeded Inception-like layer graph
(:func:`milp_partition.pipeline.generators.inception_like`, 4 branches, depth <= 3) on 4 accelerators is solved
with ``--solver none`` under a time limit, each in its own process so that its peak memory (max RSS) is its own.
Run from the repository root::

    python benchmarks/pipeline_scaling.py [--blocks 110 1100 11200] [--time-limit 60] [--plot-only]

The chart ``results/pipeline_scaling.png`` (seconds and peak memory against nodes, log-log) is
embedded in the report; ``--plot-only`` re-renders report and chart from the CSV without solving
anything (the run's command line, limit, machine and Python come from the CSV, or from the report it
replaces when the CSV predates those columns).
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_charts import from_report, pyplot, read_csv, replot_note, save  # noqa: E402

SCRIPT = "benchmarks/pipeline_scaling.py"
#: The CSV's columns: per row, then the run's settings (the same on every row; a CSV written before they existed lacks them).
FIELDS = ["nodes", "edges", "status", "objective", "solve_s", "max_rss_mb", "load_before", "heuristics", "blocks", "best"]
META = ["command", "time_limit_s", "machine", "cores", "python"]
#: The heuristics in the table's order, with their names in the chart.
HEURISTICS = [("chain_dp", "chain DP"), ("ideal_dp", "ideal DP"), ("balanced_split", "balanced split")]

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
    ap.add_argument("--plot-only", action="store_true", help="re-render the report and the chart from the CSV; solve nothing")
    args = ap.parse_args(argv)
    if args.plot_only:
        write_report(args.out_dir, plot_only=True)
        return 0
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
    meta = {
        "command": " ".join(argv if argv is not None else sys.argv[1:]),
        "time_limit_s": args.time_limit,
        "machine": platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }
    with open(args.out_dir / "pipeline_scaling.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS + META)
        w.writeheader()
        for r in rows:
            w.writerow({**{k: r[k] for k in FIELDS}, "heuristics": json.dumps(r["heuristics"]), **meta})
    write_report(args.out_dir, plot_only=False)
    return 0


def _best(row: dict[str, Any], heuristics: dict[str, list[Any]]) -> str:
    """Where the answer came from: the CSV's ``best`` (the chain's message), else the heuristic whose value it is."""
    if row.get("best") is not None:
        return str(row["best"]).replace("best solution from ", "")
    hits = [name for name, (value, _, _) in heuristics.items() if value is not None and value == row["objective"]]
    return hits[0] if hits else "?"


def _meta(rows: list[dict[str, Any]], report: Path) -> dict[str, Any]:
    """The run's settings: from the CSV's rows, else from the report a previous run wrote (``?`` where neither has them)."""
    if rows and all(k in rows[0] for k in META):
        return {k: rows[0][k] for k in META} | {"command": rows[0]["command"] or ""}
    m = from_report(report, rf"\(`python {SCRIPT} (.*)`\); do not edit\.$")
    m2 = from_report(report, r"^Machine: (\S+), (\d+) cores .* CPython (\S+?)\. .* time limit (\S+) s for the whole solve")
    return {
        "command": m[1] if m else "?",
        "machine": m2[1] if m2 else "?",
        "cores": m2[2] if m2 else "?",
        "python": m2[3] if m2 else "?",
        "time_limit_s": float(m2[4]) if m2 else "?",
    }


def chart(rows: list[dict[str, Any]], time_limit: float | None) -> Any:
    """Left: seconds against nodes (log-log), the whole solve and each heuristic that answered; right: peak memory."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    nodes = [int(r["nodes"]) for r in rows]
    ax1.plot(nodes, [float(r["solve_s"]) for r in rows], "o-", color="black", label="whole solve (--solver none)")
    for j, (name, label) in enumerate(HEURISTICS):
        pts = [(int(r["nodes"]), float(r["heuristics"][name][1])) for r in rows
               if name in r["heuristics"] and r["heuristics"][name][0] is not None]  # fmt: skip
        if pts:
            ax1.plot(*zip(*pts), "s--", color=plt.get_cmap("tab10")(j), label=label)
    if time_limit is not None:
        ax1.axhline(time_limit, color="grey", linestyle=":", linewidth=1, label=f"time limit ({time_limit:g} s)")
    for r in rows:
        ax1.annotate(_best(r, r["heuristics"]), (int(r["nodes"]), float(r["solve_s"])), xytext=(0, 8),
                     textcoords="offset points", ha="center", fontsize=7)  # fmt: skip
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    if time_limit is not None:
        ax1.set_ylim(ax1.get_ylim()[0], 8 * time_limit)  # room for the legend above the limit
    ax1.set_xlabel("nodes of the layer graph (log)")
    ax1.set_ylabel("seconds (log)")
    ax1.set_title("solve time (label: where the answer came from); heuristics: only where they answered", fontsize=9)
    ax1.grid(alpha=0.3, which="both")
    ax1.legend(fontsize=7, loc="upper center")
    ax2.plot(nodes, [float(r["max_rss_mb"]) for r in rows], "o-", color="tab:purple", label="max RSS of the process")
    ax2.set_xscale("log")
    ax2.set_ylim(bottom=0)
    ax2.set_xlabel("nodes of the layer graph (log)")
    ax2.set_ylabel("MB")
    ax2.set_title("peak memory (one process per size)", fontsize=9)
    ax2.grid(alpha=0.3, which="both")
    ax2.legend(fontsize=7)
    fig.suptitle("Pipeline partitioning of generated graphs on 4 accelerators, heuristics only", fontsize=11)
    fig.tight_layout()
    return fig


def write_report(out_dir: Path, *, plot_only: bool) -> None:
    """``pipeline_scaling.md`` and ``pipeline_scaling.png`` from ``pipeline_scaling.csv``."""
    rows = read_csv(out_dir / "pipeline_scaling.csv")
    for r in rows:
        r["heuristics"] = json.loads(r["heuristics"])
    meta = _meta(rows, out_dir / "pipeline_scaling.md")
    limit = meta["time_limit_s"] if isinstance(meta["time_limit_s"], int | float) else None
    png = save(chart(rows, limit), out_dir / "pipeline_scaling.png")
    lines = [
        "# Pipeline partitioning of large generated graphs (heuristics only)",
        "",
        f"Written by `{SCRIPT}` (`python {SCRIPT} {meta['command']}`); do not edit.",
        f"Machine: {meta['machine']}, {meta['cores']} cores shared with other work (1-minute load average in the table), "
        f"CPython {meta['python']}. Inception-like layer graphs, 4 accelerators without a memory limit, "
        f"`--solver none`, time limit {'?' if limit is None else f'{limit:g}'} s for the whole solve. "
        "Peak memory is the process's max RSS.",
        "",
        *replot_note(
            "`pipeline_scaling.csv`",
            plot_only,
            None if rows and all(k in rows[0] for k in META) else "the two lines above are kept from the previous report",
        ),
        f"![{png}]({png})",
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
            f"| {r['nodes']} | {r['edges']} | {r['status']} | {r['objective']:.6g} | {_best(r, h)} "
            f"| {r['solve_s']} | {cell('chain_dp')} | {cell('ideal_dp')} | {cell('balanced_split')} | {r['max_rss_mb']} "
            f"| {r['load_before']} |"
        )
    lines += [
        "",
        "The DPs' tables are quadratic in the graph's units, so past 5,000 units they are not built (the DPs say so at "
        "once) and the balanced split of one topological order answers (`heuristics/pipeline_split.py`); below that they "
        "stop at half the time limit. The solve's time also counts verifying each answer (O(N + E) per device).",
    ]
    (out_dir / "pipeline_scaling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
