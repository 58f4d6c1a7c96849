"""Benchmark of the joint planner (Piper's problem) on the shared instances (shared/benchmarks/joint/).

Writes ``results/joint.md`` and ``results/joint.csv``: every configuration of the shared
table (BERT-32, ResNet-50, GNMT; bandwidth 25 GiB/s, memory in GiB, N from the file)
with the exact planner's verified time per sample, status, proven bound and time, beside
Piper's value and DP time from ``shared/benchmarks/README.md``, and the gaps of the
baselines (Piper-style greedy configuration choice, PipeDream-2BW style, all data
parallel) to our value; then larger cases: BERT with 64 and 96 transformer layers (the
32nd layer repeated) on up to 4096 devices.  Run from the repository root::

    python benchmarks/joint_bench.py [--time-limit 120] [--baseline-time-limit 60] [--only bert]

The chart ``results/joint.png`` (our seconds beside Piper's DP seconds; the baselines' excess over
the optimum) is embedded in the report; ``--plot-only`` re-renders report and chart from the CSV.
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

sys.path.insert(0, str(REPO / "benchmarks"))

from bench_charts import from_report, grouped_bars, pyplot, read_csv, replot_note, save  # noqa: E402
from milp_partition.heuristics.joint_baselines import all_data_parallel, pipedream_2bw_style, piper_style  # noqa: E402

from milp_partition.io.piper import read_joint  # noqa: E402
from milp_partition.joint.dp import joint_data  # noqa: E402
from milp_partition.joint.generators import repeat_block  # noqa: E402
from milp_partition.joint.problem import JointProblem, JointSolveSettings, joint_cluster  # noqa: E402
from milp_partition.joint.solve import solve_joint  # noqa: E402
from milp_partition.verifiers.joint import verify_joint  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks" / "joint"
GIB = 2**30
BANDWIDTH = 25 * GIB
#: (file, k, memory GiB, Piper's time per sample or None for infeasible, Piper's DP seconds) from shared/benchmarks/README.md
PIPER = [
    ("bert32a100.json", 8, 1, None, 0.1),
    ("bert32a100.json", 8, 8, 0.16585575, 0.2),
    ("bert32a100.json", 32, 2, 0.0665495, 0.2),
    ("bert32a100.json", 64, 8, 0.0202005502945, 0.5),
    ("bert32a100.json", 128, 1, 0.03887175, 0.6),
    ("bert32a100.json", 512, 8, 0.00256112784601, 4.8),
    ("bert32a100.json", 2048, 80, 0.00066371274, 123),
    ("resnet.json", 8, 4, 73.4932860001, 5.7),
    ("resnet.json", 8, 8, 63.4335366, 4.0),
    ("resnet.json", 16, 1.5, None, 5.2),
    ("resnet.json", 16, 4, 35.3334375, 5.2),
    ("resnet.json", 32, 2, 24.6258985, 9.0),
    ("resnet.json", 32, 8, 15.7580261, 9.6),
    ("resnet.json", 64, 1, None, 12.3),
    ("resnet.json", 128, 4, 4.30571356, 27),
    ("resnet.json", 128, 16, 3.65985872, 35),
    ("gnmt.json", 2, 2.5, 263.354289, 435),
    ("gnmt.json", 4, 1.2, 137.130992, 617),
]
#: larger cases: (transformer layers, k, memory GiB)
LARGER = [(64, 512, 8), (64, 2048, 80), (96, 1024, 16), (96, 4096, 80)]


def _fmt(x: float | None, digits: int = 10) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}g}"


def _run(problem: JointProblem, args: argparse.Namespace) -> dict:
    settings = JointSolveSettings(time_limit_s=args.time_limit)  # the CLI's defaults: warm starts on
    r = solve_joint(problem, settings)
    row = {
        "status": r.status,
        "objective": r.objective,
        "bound": r.bound,
        "gap": r.gap,
        "seconds": r.solve_seconds,
        "passes": r.solver_notes.get("passes"),
        "stages": len(r.stages),
    }
    # baselines, timed on their own (the Piper-style DP gets its own limit)
    data = joint_data(problem)
    for name, fn in (
        ("all_dp", all_data_parallel),
        ("pipedream_2bw", pipedream_2bw_style),
        ("piper_style", lambda dd: piper_style(dd, time_limit_s=args.baseline_time_limit)),
    ):
        t0 = time.monotonic()
        plan, _ = fn(data)
        value = None
        if plan is not None:
            rep = verify_joint(problem, plan)
            value = rep.objective if rep.feasible else None
        row[name] = value
        row[name + "_seconds"] = time.monotonic() - t0
    return row


def _gap(base: float | None, ours: float | None) -> str:
    if base is None or ours is None:
        return "-" if base is None else "ours none"
    return f"{(base - ours) / ours * 100:+.3f}%"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--baseline-time-limit", type=float, default=30.0)
    ap.add_argument("--only", help="run only files whose name contains this")
    ap.add_argument("--no-larger", action="store_true")
    ap.add_argument("--plot-only", action="store_true", help="re-render the report and the chart from the CSV; solve nothing")
    args = ap.parse_args()
    if args.plot_only:
        write_report(read_csv(REPO / "results" / "joint.csv"), REPO / "results", plot_only=True)
        return 0
    rows = []
    for name, k, mem, piper, piper_s in PIPER:
        if args.only and args.only not in name:
            continue
        problem = read_joint(SHARED / name, devices=k, memory_bytes=mem * GIB, bandwidth_bytes_per_s=BANDWIDTH)
        row = {"case": name, "k": k, "memory_gib": mem, "piper": piper, "piper_seconds": piper_s, **_run(problem, args)}
        rows.append(row)
        print(f"{name} k={k} M={mem}GiB: {row['status']} {row['objective']} (Piper {piper}) {row['seconds']:.1f}s", flush=True)
    if not args.no_larger and not args.only:
        base = read_joint(SHARED / "bert32a100.json", devices=8, memory_bytes=GIB, bandwidth_bytes_per_s=BANDWIDTH)
        for layers, k, mem in LARGER:
            problem = repeat_block(base, layers)
            problem = problem.with_cluster(joint_cluster(k, mem * GIB, problem.cluster.bandwidth_bytes_per_s))
            row = {"case": f"bert{layers} (repeated layer)", "k": k, "memory_gib": mem, "piper": None, "piper_seconds": None}
            row.update(_run(problem, args))
            rows.append(row)
            print(f"bert{layers} k={k} M={mem}GiB: {row['status']} {row['objective']} {row['seconds']:.1f}s", flush=True)
    out = REPO / "results"
    out.mkdir(exist_ok=True)
    for r in rows:
        r.update(time_limit_s=args.time_limit, baseline_time_limit_s=args.baseline_time_limit,
                 machine=platform.machine(), python=platform.python_version())  # fmt: skip
    keys = list(rows[0].keys()) if rows else []
    with open(out / "joint.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    write_report(rows, out, plot_only=False)
    return 0


def _label(r: dict) -> str:
    case = str(r["case"]).replace(".json", "").replace(" (repeated layer)", "")
    return f"{case} k={r['k']} {r['memory_gib']:g}G"


def chart(rows: list[dict], path: Path) -> str:
    """Seconds per case (ours, Piper's C++ DP) and the baselines' excess over the optimum, one group per case."""
    plt = pyplot()
    fig, (ax_t, ax_g) = plt.subplots(1, 2, figsize=(15, 5.2))
    groups = [_label(r) for r in rows]
    proven = [r["status"] in ("optimal", "infeasible") for r in rows]
    grouped_bars(
        ax_t,
        groups,
        [
            ("ours (exact DP, whole solve)", [r["seconds"] for r in rows], proven),
            ("Piper's C++ DP (its README)", [r["piper_seconds"] for r in rows], [True] * len(rows)),
        ],
    )
    ax_t.set_ylabel("seconds (log scale)")
    ax_t.set_title("time per case (infeasible cases: the time to prove it)", fontsize=9)

    def excess(name: str) -> list[float | None]:
        vals: list[float | None] = []
        for r in rows:
            base, ours = r.get(name), r.get("objective")
            vals.append(None if base is None or ours is None else max(0.0, (base - ours) / ours * 100))
        return vals

    grouped_bars(
        ax_g,
        groups,
        [
            ("PipeDream-2BW style", excess("pipedream_2bw"), [True] * len(rows)),
            ("all data parallel", excess("all_dp"), [True] * len(rows)),
        ],
        log=False,
    )
    ax_g.set_ylabel("excess over the proven optimum (%)")
    ax_g.set_title("baselines (no bar: the baseline found no plan that fits)", fontsize=9)
    fig.suptitle("Joint planner on Piper's instances and larger BERTs (bandwidth 25 GiB/s)")
    fig.tight_layout()
    return save(fig, path)


def write_report(rows: list[dict], out: Path, plot_only: bool) -> None:
    """``results/joint.md`` (and the chart) from the rows."""
    first = dict(rows[0]) if rows else {}
    if "time_limit_s" not in first:  # a CSV written before it carried the run's settings: they are in the old report
        m = from_report(out / "joint.md", r"time limit (\S+) s per case, Piper-style baseline (\S+) s\) on (\S+) / Python (\S+),")
        if m is not None:
            first.update(time_limit_s=m[1], baseline_time_limit_s=m[2], machine=m[3], python=m[4])
    png = chart(rows, out / "joint.png")
    lines = [
        "# Joint planner (Piper's problem): results",
        "",
        f"Written by `benchmarks/joint_bench.py` (time limit {first.get('time_limit_s', '?')} s per case, Piper-style baseline "
        f"{first.get('baseline_time_limit_s', '?')} s) on {first.get('machine', '?')} / Python {first.get('python', '?')}, one "
        "thread, on a 2-core machine shared with other work (times are rough). Bandwidth 25 GiB/s, memory in GiB, N from the "
        "file. Ours: the verifier's time per sample of the exact DP's plan, and the seconds of the whole solve with the "
        "CLI's defaults (the cheap baselines and a Piper-style warm start of at most 2 s included); status `optimal` = proven "
        "(exhaustive feasibility DP bisected on the target time; a strict pass at the best value finds nothing better), "
        "`infeasible` = the exhaustive DP found no plan. Piper's values and DP seconds are from "
        "`shared/benchmarks/README.md` (its C++ DP, one thread). Baseline columns: the baseline's verified value relative "
        "to ours (+x% = slower than ours), each run on its own. The Piper-style column is this project's Python "
        "re-implementation of Piper's DP with its greedy configuration choice, stopped at its own time limit: a huge gap "
        "means it had not converged in that time (its first plans are poor), not that Piper's C++ planner does that badly "
        "(its values are the Piper column). `-`: no plan found.",
        "",
        *replot_note("`joint.csv`", plot_only),
        f"![{png}]({png})",
        "",
        "| case | k | memory (GiB) | ours | status | bound | ours s | Piper | Piper s | ours vs Piper | Piper-style | PipeDream-2BW | all-DP |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        vs = "-"
        if r["piper"] is not None and r["objective"] is not None:
            vs = f"{(r['objective'] - r['piper']) / r['piper'] * 100:+.2e}%"
        elif r["piper"] is None and r["status"] == "infeasible":
            vs = "both infeasible"
        lines.append(
            f"| {r['case']} | {r['k']} | {r['memory_gib']} | {_fmt(r['objective'])} | {r['status']} | {_fmt(r['bound'])} | "
            f"{r['seconds']:.1f} | {_fmt(r['piper']) if r['piper'] is not None else ('infeasible' if r['piper_seconds'] is not None else '-')} | "
            f"{_fmt(r['piper_seconds'], 4)} | {vs} | {_gap(r['piper_style'], r['objective'])} | "
            f"{_gap(r['pipedream_2bw'], r['objective'])} | {_gap(r['all_dp'], r['objective'])} |"
        )
    (out / "joint.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
