"""Benchmark of the joint problem's slot MILP (formulations/joint.py) beside the exact DP.

Writes ``results/joint_milp.md`` and ``results/joint_milp.csv``.  Two parts:

- shared instances (``shared/benchmarks/joint/``, bandwidth 25 GiB/s, N from the file) and a
  narrow generated graph: the DP's proven answer beside the MILP's (CP-SAT, warm-started by
  the baselines) at the same time limit, to show where each method stands;
- wide generated graphs (:func:`milp_partition.joint.generators.parallel_branches`) with more
  ideals than the DP's cap of 200,000: the DP cannot run; the chain falls back to the MILP,
  which reports its best verified plan, its proven bound and the gap.

Run from the repository root::

    python benchmarks/joint_milp_bench.py [--time-limit 60]
"""

from __future__ import annotations

import argparse
import csv
import math
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from milp_partition.io.piper import read_joint  # noqa: E402
from milp_partition.joint.generators import parallel_branches  # noqa: E402
from milp_partition.joint.problem import JointProblem, JointSolveSettings  # noqa: E402
from milp_partition.joint.solve import solve_joint  # noqa: E402

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
WIDE = [
    ("branches 6x8 k=8 2GiB", lambda: parallel_branches(6, 8, 8, 2 * GIB, seed=0)),
    ("branches 8x6 k=16 2GiB", lambda: parallel_branches(8, 6, 16, 2 * GIB, seed=2)),
]
FIELDS = ["part", "case", "nodes", "method", "status", "objective", "bound", "gap", "seconds", "note"]


def run(label: str, problem: JointProblem, method: str, part: str, limit: float) -> dict[str, object]:
    t0 = time.monotonic()
    result = solve_joint(problem, JointSolveSettings(time_limit_s=limit, method=method, threads=2))
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
        "note": "more ideals than the DP's cap" if "too_many_ideals" in result.solver_notes else "",
    }
    print(" | ".join(str(row[f]) for f in FIELDS), flush=True)
    return row


def fmt(value: object) -> str:
    if value in ("", None):
        return "-"
    x = float(str(value))
    return f"{x:.10g}" if math.isfinite(x) else "-"


def table_rows(rows: list[dict[str, object]], part: str, note: bool) -> list[str]:
    """The Markdown rows of one part."""
    return [
        f"| {r['case']} | {r['nodes']} | {r['method']} | {r['status']} | {fmt(r['objective'])} | {fmt(r['bound'])} | "
        f"{r['gap'] or '-'} | {r['seconds']} |" + (f" {r['note']} |" if note else "")
        for r in rows
        if r["part"] == part
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    rows = []
    for label, make in CROSS:
        problem = make()
        rows.append(run(label, problem, "dp", "cross-check", args.time_limit))
        rows.append(run(label, problem, "milp", "cross-check", args.time_limit))
    for label, make in WIDE:
        rows.append(run(label, make(), "dp", "wide", args.time_limit))
    out = REPO / "results"
    with open(out / "joint_milp.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    lines = [
        "# Joint problem: the slot MILP beside the exact DP",
        "",
        f"Written by `benchmarks/joint_milp_bench.py` (time limit {args.time_limit:g} s per run, 2 threads, CP-SAT for the "
        f"MILP) on {platform.machine()} / Python {platform.python_version()}, a 2-core machine shared with other work "
        "(times are rough). Objectives are the verifier's time per sample (s); bounds are proven; `joint-dp` is the "
        "exact DP, `joint-milp/cpsat` the slot MILP of `formulations/joint.py` (warm-started by the baselines where "
        "the DP's index exists).",
        "",
        "## Cross-check: DP and MILP on the same instances",
        "",
        "| case | nodes | method | status | objective | bound | gap | s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += table_rows(rows, "cross-check", note=False)
    lines += [
        "",
        "## Wide graphs: past the DP's cap of 200,000 ideals",
        "",
        "`parallel_branches(b, depth)`: a source, b parallel chains, a sink. The default method is the DP; it finds "
        "more ideals than its cap and the chain runs the MILP instead (no baseline warm start: the baselines need the "
        "DP's index).",
        "",
        "| case | nodes | method | status | objective | bound | gap | s | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += table_rows(rows, "wide", note=True)
    (out / "joint_milp.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'joint_milp.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
