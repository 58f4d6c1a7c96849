"""Benchmark of the joint problem's slot MILP (formulations/joint.py) beside the exact DP.

Writes ``results/joint_milp.md`` and ``results/joint_milp.csv``.  Two parts:

- shared instances (``shared/benchmarks/joint/``, bandwidth 25 GiB/s, N from the file) and a
  narrow generated graph: the DP's proven answer beside the MILP's (CP-SAT, warm-started by
  the baselines) at the same time limit, to show where each method stands;
- wide generated graphs (:func:`milp_partition.joint.generators.parallel_branches`) with more
  ideals than the DP's cap of 200,000: the DP cannot run; the chain falls back to the MILP,
  which reports its best verified plan, its proven bound and the gap.

Run from the repository root::

    python benchmarks/joint_milp_bench.py [--time-limit 60] [--plot-only] [--only cross-check|wide]

``--only wide`` solves the wide graphs only (about six minutes) and keeps the cross-check rows of
the CSV from their own run.  The chart ``results/joint_milp.png`` (seconds and gap per case, DP beside MILP) is embedded in the
report; ``--plot-only`` re-renders report and chart from ``results/joint_milp.csv`` without solving
anything (the run's time limit, machine and Python come from the CSV, or from the report it
replaces when the CSV predates those columns).
"""

from __future__ import annotations

import argparse
import csv
import math
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_charts import from_report, grouped_bars, pyplot, read_csv, replot_note, save  # noqa: E402
from milp_partition.formulations.joint import work_lower_bound_s  # noqa: E402

from milp_partition.io.piper import read_joint  # noqa: E402
from milp_partition.joint.generators import parallel_branches  # noqa: E402
from milp_partition.joint.problem import JointProblem, JointSolveSettings  # noqa: E402
from milp_partition.joint.solve import solve_joint  # noqa: E402
from milp_partition.result import Result  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks" / "joint"
GIB = 2**30
#: (label, builder) pairs; the builder makes the instance
CROSS = [
    (
        "bert32a100.json k=8 1GiB",
        lambda: read_joint(SHARED / "bert32a100.json", devices=8, memory_bytes=1 * GIB, bandwidth_bytes_per_s=25 * GIB),
    ),
    (
        "bert32a100.json k=8 8GiB",
        lambda: read_joint(SHARED / "bert32a100.json", devices=8, memory_bytes=8 * GIB, bandwidth_bytes_per_s=25 * GIB),
    ),
    (
        "resnet.json k=8 8GiB",
        lambda: read_joint(SHARED / "resnet.json", devices=8, memory_bytes=8 * GIB, bandwidth_bytes_per_s=25 * GIB),
    ),
    (
        "gnmt.json k=2 2.5GiB",
        lambda: read_joint(SHARED / "gnmt.json", devices=2, memory_bytes=2.5 * GIB, bandwidth_bytes_per_s=25 * GIB),
    ),
    ("branches 3x4 k=4 1GiB", lambda: parallel_branches(3, 4, 4, 1 * GIB, seed=1)),
]
#: (label, builder, max_ideals): 4x10 has 14,641 ideals, under the DP's default cap; its second row lowers the cap
#: so that the wide-graph path (order DP, segment bound, slot MILP) runs instead
WIDE = [
    ("branches 6x8 k=8 2GiB", lambda: parallel_branches(6, 8, 8, 2 * GIB, seed=0), None),
    ("branches 8x6 k=16 2GiB", lambda: parallel_branches(8, 6, 16, 2 * GIB, seed=2), None),
    ("branches 10x4 k=16 2GiB", lambda: parallel_branches(10, 4, 16, 2 * GIB, seed=0), None),
    ("branches 6x8 k=8 1.5GiB", lambda: parallel_branches(6, 8, 8, 1.5 * GIB, seed=0), None),
    ("branches 4x10 k=8 2GiB", lambda: parallel_branches(4, 10, 8, 2 * GIB, seed=0), None),
    ("branches 4x10 k=8 2GiB, cap 10k", lambda: parallel_branches(4, 10, 8, 2 * GIB, seed=0), 10_000),
    ("branches 5x8 k=8 1.5GiB", lambda: parallel_branches(5, 8, 8, 1.5 * GIB, seed=0), None),
]
FIELDS = ["part", "case", "nodes", "method", "status", "objective", "bound", "gap", "seconds", "note"]
#: The run's settings, the same on every row (a CSV written before these existed lacks them).
META = ["time_limit_s", "machine", "python"]


def _note(result: Result, problem: JointProblem, max_ideals: int | None) -> str:
    """Why the DP did not run (its cap) and where the bound came from (the work bound, the segment, column or stage bound, CP-SAT)."""
    notes = result.solver_notes
    if "too_many_ideals" not in notes:
        return ""
    if "compiled passes" in str(notes["too_many_ideals"]):
        cap = "more ideals than the DP's compiled passes take"
    else:
        cap = "more ideals than the DP's cap" + ("" if max_ideals is None else f" (--max-ideals {max_ideals})")
    if result.bound is None:
        return cap
    work = work_lower_bound_s(problem)
    seg = notes.get("segment_bound")
    staged = notes.get("stage_bound")
    column = notes.get("column_bound")
    if result.bound <= work * (1 + 1e-9):
        return cap + "; bound: the work bound"
    earlier = max([x for x in (seg, staged) if isinstance(x, float)], default=work)
    if isinstance(column, float) and column > earlier * (1 + 1e-9) and result.bound <= column * (1 + 1e-12):
        return cap + "; bound: column bound"
    if (
        isinstance(staged, float)
        and result.bound <= staged * (1 + 1e-12)
        and not (isinstance(seg, float) and result.bound <= seg * (1 + 1e-12))
    ):
        return cap + "; bound: stage bound"
    if isinstance(seg, float) and result.bound <= seg * (1 + 1e-12):
        return cap + "; bound: segment bound"
    return cap + "; bound: CP-SAT"


def run(
    label: str, problem: JointProblem, method: str, part: str, limit: float, max_ideals: int | None = None
) -> dict[str, object]:
    t0 = time.monotonic()
    settings = JointSolveSettings(time_limit_s=limit, method=method, threads=2)
    if max_ideals is not None:
        settings = replace(settings, max_ideals=max_ideals)
    result = solve_joint(problem, settings)
    seconds = time.monotonic() - t0
    row = {
        "part": part,
        "case": label,
        "nodes": len(problem.nodes),
        "method": result.solver,
        "status": str(result.status),
        "objective": "" if result.objective is None else repr(result.objective),
        "bound": "" if result.bound is None else repr(result.bound),
        "gap": "" if result.gap is None else f"{100 * result.gap:.3g}%",
        "seconds": f"{seconds:.1f}",
        "note": _note(result, problem, max_ideals),
    }
    print(" | ".join(str(row[f]) for f in FIELDS), flush=True)
    return row


def fmt(value: object) -> str:
    if value in ("", None):
        return "-"
    x = float(str(value))
    return f"{x:.10g}" if math.isfinite(x) else "-"


def table_rows(rows: list[dict[str, Any]], part: str, note: bool) -> list[str]:
    """The Markdown rows of one part."""
    return [
        f"| {r['case']} | {r['nodes']} | {r['method']} | {r['status']} | {fmt(r['objective'])} | {fmt(r['bound'])} | "
        f"{r['gap'] or '-'} | {r['seconds']} |" + (f" {r['note'] or ''} |" if note else "")
        for r in rows
        if r["part"] == part
    ]


def _gap_percent(row: dict[str, Any]) -> float | None:
    gap = row.get("gap")
    return None if gap in ("", None) else float(str(gap).rstrip("%"))


def chart(rows: list[dict[str, Any]], time_limit: float | None) -> Any:
    """Per case: seconds (left) and gap (right) of the DP beside the MILP; hatched, pale: the run ended without a proof."""
    plt = pyplot()
    cases = list(dict.fromkeys(str(r["case"]) for r in rows))
    wide = {str(r["case"]) for r in rows if r["part"] == "wide"}
    groups = [f"{c} (wide)" if c in wide else c for c in cases]
    methods = [("joint DP", "joint-dp"), ("slot MILP (CP-SAT)", "joint-milp/cpsat")]
    by = {(str(r["case"]), str(r["method"])): r for r in rows}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.5))
    width = 0.8 / len(methods)
    for ax, value, label in (
        (ax1, lambda r: float(r["seconds"]), "seconds (wall clock, whole solve)"),
        (ax2, _gap_percent, "gap between objective and proven bound (%)"),
    ):
        series = []
        for name, method in methods:
            got = [by.get((c, method)) for c in cases]
            series.append(
                (
                    name,
                    [None if r is None else value(r) for r in got],
                    [r is not None and r["status"] in ("optimal", "infeasible") for r in got],
                )
            )
        grouped_bars(ax, groups, series, log=False)
        ax.set_ylabel(label)
        ax.set_xlabel("case (instance, devices k, memory per device)")
        for j, (_, method) in enumerate(methods):
            for i, c in enumerate(cases):
                r = by.get((c, method))
                if r is None:
                    continue
                x = i + (j - (len(methods) - 1) / 2) * width
                if ax is ax2:
                    gap = _gap_percent(r)
                    text = str(r["status"]) if gap is None else "0%" if gap == 0 else f"{gap:.3g}%"
                else:
                    text = f"{float(r['seconds']):g}"
                ax.annotate(text, (x, value(r) or 0.0), xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7, rotation=90 if ax is ax2 else 0)  # fmt: skip
        ax.set_xlim(-0.5, len(cases) - 0.5)
        ax.margins(y=0.15)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    cmap = plt.get_cmap("tab10")
    handles = [Patch(color=cmap(j), label=name) for j, (name, _) in enumerate(methods)]
    handles.append(Patch(facecolor="lightgrey", edgecolor="white", hatch="//", label="stopped at the limit, no proof"))
    if time_limit is not None:
        ax1.axhline(time_limit, color="grey", linestyle="--", linewidth=1)
        handles.append(Line2D([], [], color="grey", linestyle="--", label=f"time limit ({time_limit:g} s)"))
    for ax in (ax1, ax2):
        ax.get_legend().remove()
    ax1.set_title("time per run", fontsize=9)
    ax2.set_title("gap at the end of the run (wide: the DP is past its cap, the chain ran the MILP)", fontsize=9)
    fig.suptitle("Joint problem: the slot MILP beside the exact DP", fontsize=11)
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=8, bbox_to_anchor=(0.5, 0.95), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.91))
    return fig


def _meta(rows: list[dict[str, Any]], report: Path) -> dict[str, Any]:
    """The run's settings: from the CSV's rows, else from the report a previous run wrote (``?`` where neither has them)."""
    if rows and all(k in rows[0] for k in META):
        return {k: rows[0][k] for k in META}
    m = from_report(report, r"\(time limit (\S+) s per run, .*\) on (\S+) / Python (\S+), a ")
    return {"time_limit_s": float(m[1]), "machine": m[2], "python": m[3]} if m else dict.fromkeys(META, "?")


def write_report(out: Path, *, plot_only: bool) -> None:
    """``joint_milp.md`` and ``joint_milp.png`` from ``joint_milp.csv``."""
    rows = read_csv(out / "joint_milp.csv")
    meta = _meta(rows, out / "joint_milp.md")
    limit = meta["time_limit_s"] if isinstance(meta["time_limit_s"], int | float) else None
    png = save(chart(rows, limit), out / "joint_milp.png")
    lines = [
        "# Joint problem: the slot MILP beside the exact DP",
        "",
        f"Written by `benchmarks/joint_milp_bench.py` (time limit {'?' if limit is None else f'{limit:g}'} s per run, 2 threads, CP-SAT for the "
        f"MILP) on {meta['machine']} / Python {meta['python']}, a 2-core machine shared with other work "
        "(times are rough). Objectives are the verifier's time per sample (s); bounds are proven; `joint-dp` is the "
        "exact DP, `joint-milp/cpsat` the slot MILP of `formulations/joint.py` (warm-started by the best baseline: "
        "on the wide graphs, the DP along topological orders).",
        "",
        *replot_note(
            "`joint_milp.csv`",
            plot_only,
            None if rows and all(k in rows[0] for k in META) else "limit, machine and Python kept from the previous report",
        ),
        f"![{png}]({png})",
        "",
        "## Cross-check: DP and MILP on the same instances",
        "",
        "| case | nodes | method | status | objective | bound | gap | s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += table_rows(rows, "cross-check", note=False)
    lines += [
        "",
        "## Wide graphs: past the DP's cap of 200,000 ideals, or past what its C pass takes",
        "",
        "`parallel_branches(b, depth)`: a source, b parallel chains, a sink. The default method is the DP; where it "
        "finds more ideals than its cap the chain runs, instead, the exact DP along depth-first topological orders "
        "of one, two and three groups of chains (`heuristics/joint_orders.py`, a heuristic whose best plan "
        "warm-starts the MILP), the segment bound "
        "(`milp_partition/joint/segment_bound.py`, a proven bound from an LP over chain segments in pooled stage "
        "classes), the stage bound (`milp_partition/joint/stage_bound.py`, a proven Lagrangian bound per stage "
        "sequence over whole chains; up to 20,000 sequences, so not at k = 16) and the slot MILP; the note says which "
        "gave the bound. 4x10 has 14,643 ideals: its first row is the DP (its C pass: the pairs of ideals are few "
        "enough), the second the same instance with the cap lowered to 10,000. 5x8 has 59,049 ideals, under the cap "
        "but more than the C pass takes (40,000): the chain takes the same route as past the cap (the DP's numpy "
        "passes ended 16.4% from their bound in 60 s).",
        "",
        "| case | nodes | method | status | objective | bound | gap | s | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += table_rows(rows, "wide", note=True)
    (out / "joint_milp.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'joint_milp.md'} and {out / png}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--plot-only", action="store_true", help="re-render the report and the chart from the CSV; solve nothing")
    ap.add_argument(
        "--only",
        choices=("cross-check", "wide"),
        help="solve this part only; the other part's rows are kept from results/joint_milp.csv (with their own run's settings)",
    )
    args = ap.parse_args()
    out = REPO / "results"
    if args.plot_only:
        write_report(out, plot_only=True)
        return 0
    meta = {"time_limit_s": args.time_limit, "machine": platform.machine(), "python": platform.python_version()}
    kept = [r for r in read_csv(out / "joint_milp.csv") if r["part"] != args.only] if args.only else []
    rows = []
    for label, make in CROSS if args.only in (None, "cross-check") else []:
        problem = make()
        rows.append({**run(label, problem, "dp", "cross-check", args.time_limit), **meta})
        rows.append({**run(label, problem, "milp", "cross-check", args.time_limit), **meta})
    for label, make, max_ideals in WIDE if args.only in (None, "wide") else []:
        rows.append({**run(label, make(), "dp", "wide", args.time_limit, max_ideals), **meta})
    parts = ("cross-check", "wide")
    rows = sorted([*kept, *rows], key=lambda r: parts.index(str(r["part"])))  # stable: each part keeps its order
    with open(out / "joint_milp.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS + META, restval="?")
        w.writeheader()
        w.writerows(rows)
    write_report(out, plot_only=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
