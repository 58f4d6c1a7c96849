"""The proven bounds for wide graphs side by side: segment, stage and column bound from the same start.

Writes ``results/joint_bounds.md`` (a table, no chart).  For each wide generated graph
(:func:`milp_partition.joint.generators.parallel_branches`) the same upper end (the DP's proven optimum where the DP
runs, else the best plan of the DP along grouped topological orders) and the same lower end (the work bound), then
each bound alone with the same time limit; where the DP proves the optimum the table says how far below it each bound
stays.  The column bound's integer paths may find a better plan than the upper end: the table gives it.

Run from the repository root::

    python benchmarks/joint_bounds_bench.py [--time-limit 60]

About (3 bounds x time limit + the DP's and the orders' time) per case: 15 minutes at 60 s.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from milp_partition.formulations.joint import work_lower_bound_s  # noqa: E402
from milp_partition.heuristics.joint_orders import grouped_order_dp  # noqa: E402

from milp_partition.budget import Budget  # noqa: E402
from milp_partition.joint.column_bound import column_bound_report  # noqa: E402
from milp_partition.joint.dp import TooManyIdeals, joint_data, search  # noqa: E402
from milp_partition.joint.generators import parallel_branches  # noqa: E402
from milp_partition.joint.problem import JointProblem  # noqa: E402
from milp_partition.joint.segment_bound import segment_bound  # noqa: E402
from milp_partition.joint.solve import BANDS_OF_FOUR_FROM_S, ROW_PER_STATE_FROM_S, _bands  # noqa: E402
from milp_partition.joint.stage_bound import MAX_SEQUENCES, sequences, stage_bound  # noqa: E402
from milp_partition.verifiers.joint import verify_joint  # noqa: E402

GIB = 2**30
#: (label, builder): the first two are under the DP's cap (it proves their optimum), the rest past it
CASES: list[tuple[str, Callable[[], JointProblem]]] = [
    ("branches 3x6 k=8 1.2GiB", lambda: parallel_branches(3, 6, 8, 1.2 * GIB, seed=0)),
    ("branches 4x10 k=8 2GiB", lambda: parallel_branches(4, 10, 8, 2 * GIB, seed=0)),
    ("branches 6x8 k=8 2GiB", lambda: parallel_branches(6, 8, 8, 2 * GIB, seed=0)),
    ("branches 10x4 k=16 2GiB", lambda: parallel_branches(10, 4, 16, 2 * GIB, seed=0)),
]


def upper_end(problem: JointProblem, limit: float) -> tuple[float, str]:
    """The DP's proven optimum where it runs (under its cap, within ``limit``), else the orders' best plan."""
    try:
        data = joint_data(problem)
    except TooManyIdeals:
        plan, _ = grouped_order_dp(problem, Budget.starting_now(limit), (1, 2, 3))
        assert plan is not None
        return verify_joint(problem, plan).objective, "orders' plan"
    found = search(data, budget=Budget.starting_now(limit))
    return found.value, ("optimum (DP)" if not found.timed_out else "DP's plan (time limit)")


def pct(value: float, ref: float) -> str:
    return f"{100 * (ref - value) / ref:.3g}%" if math.isfinite(value) and ref > 0 else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per bound (default 60)")
    args = parser.parse_args()
    limit = args.time_limit
    lines = [
        "# Joint problem: proven bounds for wide graphs",
        "",
        f"Written by `benchmarks/joint_bounds_bench.py` (time limit {limit:g} s per bound, one thread) on "
        f"{platform.machine()} / Python {platform.python_version()}, a 2-core machine shared with other work "
        "(times are rough). Each bound starts from the work bound and the same upper end; `below` is how far under "
        "the upper end it stays (where the upper end is the DP's proven optimum, how far under the optimum). The "
        "column bound's integer paths may give a better plan than the upper end (last column). The column bound's "
        f"masters are the chain's for a share of {limit:g} s (`_bands` in milp_partition/joint/solve.py): a row per "
        "state where the stage bound runs; where it cannot (k = 16), one row for all states, then, from a share of "
        f"{BANDS_OF_FOUR_FROM_S:g} s, a row per band of four states after it (from {ROW_PER_STATE_FROM_S:g} s a row "
        "per state), the columns handed over; its `s` is the time until its bound was proven (a finer master may run "
        "on to the limit and prove no more).",
        "",
        "| case | upper end | s | segment bound | below | stage bound | below | column bound | below | s | column's plan |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, make in CASES:
        problem = make()
        t0 = time.monotonic()
        upper, kind = upper_end(problem, 300.0)
        upper_s = time.monotonic() - t0
        work = work_lower_bound_s(problem)
        seg = segment_bound(problem, work, upper, Budget.starting_now(limit))
        staged = sequences(problem) is not None  # past MAX_SEQUENCES the stage bound returns its start (the work bound)
        stage = stage_bound(problem, work, upper, Budget.starting_now(limit))
        stage_cells = f"{stage:.8g} | {pct(stage, upper)}" if staged else f"not run (over {MAX_SEQUENCES:,} sequences) | -"
        t1 = time.monotonic()
        # the chain's masters for a share of the bench's time limit
        report = column_bound_report(problem, work, upper, Budget.starting_now(limit), bands=_bands(staged, limit))
        column_s = report.bound_after_s if report.proven else time.monotonic() - t1  # until its bound was proven
        plans = [verify_joint(problem, p).objective for p in report.plans]
        better = f"{min(plans):.8g}" if plans else "-"
        column = f"{report.bound:.8g}" if report.proven else f"{report.bound:.8g} (no target proven: the work bound)"
        row = (
            f"| {label} | {upper:.8g} ({kind}) | {upper_s:.1f} | {seg:.8g} | {pct(seg, upper)} | {stage_cells} | "
            f"{column} | {pct(report.bound, upper)} | {column_s:.1f} | {better} |"
        )
        print(row, flush=True)
        lines.append(row)
    out = REPO / "results" / "joint_bounds.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
