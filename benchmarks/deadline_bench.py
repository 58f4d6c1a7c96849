"""Time limits on inputs too large to solve: whole-process wall time of ``milp-partition solve`` against its limit.

Writes ``results/deadlines.md`` and ``.csv``.  The inputs are issue 43's item 9: a 20,000-node chain (a seeded
:func:`milp_partition.pipeline.generators.inception_like` graph with one branch of depth one per block, so every
node feeds the next) at ``--time-limit 30``, with CP-SAT, CBC, 4,096 devices, the memory objective and the 1F1B
memory model; and joint shapes that are impossible (``--stages 1000000000``, ``--stages 9`` on 8 devices).  Each
run is its own process, timed from outside; the bar is ``1.25 x limit + 10 s``.  Run from the repository root::

    python benchmarks/deadline_bench.py [--only SUBSTRING] [--nodes 20000] [--time-limit 30]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = "benchmarks/deadline_bench.py"
FIELDS = [
    "case",
    "time_limit_s",
    "bar_s",
    "wall_s",
    "within",
    "exit",
    "status",
    "objective",
    "bound",
    "gap",
    "stopped_by",
    "load_1min",
]


def _chain(nodes: int, path: Path) -> None:
    """Write the seeded chain of ``nodes`` nodes (the project's generator) as a native graph file."""
    from milp_partition.io.native import write_native
    from milp_partition.pipeline.generators import InceptionLikeSettings, inception_like
    from milp_partition.pipeline.problem import Instance

    graph = inception_like(0, InceptionLikeSettings(blocks=(nodes - 1) // 2, branches=1, max_depth=1))
    write_native(Instance(graph, None, str(path)), path)


def _cases(chain: Path, limit: float) -> list[tuple[str, float, list[str]]]:
    lim = str(limit)
    base = ["solve", str(chain), "--devices", "8", "--time-limit", lim]
    joint = str(REPO.parent / "shared" / "benchmarks" / "joint" / "bert32a100.json")
    return [
        ("chain cpsat", limit, base),
        ("chain cbc", limit, [*base, "--solver", "cbc"]),
        ("chain 4096 devices", limit, ["solve", str(chain), "--devices", "4096", "--time-limit", lim]),
        ("chain objective memory", limit, [*base, "--objective", "memory", "--max-time-per-sample", "1e9"]),
        ("chain 1f1b", limit, [*base, "--memory-model", "1f1b"]),
        (
            "joint stages 1e9",
            5.0,
            ["solve", joint, "--problem", "joint", "--devices", "8", "--stages", "1000000000", "--time-limit", "5"],
        ),
        (
            "joint stages 9 of 8",
            5.0,
            ["solve", joint, "--problem", "joint", "--devices", "8", "--stages", "9", "--time-limit", "5"],
        ),
    ]


def _run(case: str, limit: float, argv: list[str], out: Path) -> dict[str, object]:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "milp_partition", *argv, "--quiet", "--output", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=max(600.0, 10 * limit),
    )
    wall = time.monotonic() - start
    bar = 1.25 * limit + 10.0
    row: dict[str, object] = {"case": case, "time_limit_s": limit, "bar_s": bar, "wall_s": round(wall, 1)}
    row["within"] = "yes" if wall <= bar else "NO"
    row["exit"] = proc.returncode
    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError):
        data = {"status": (proc.stderr.strip().splitlines() or ["-"])[-1][:80]}
    for key in ("status", "objective", "bound", "gap", "stopped_by"):
        row[key] = data.get(key, "-") if data.get(key) is not None else "-"
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    parser.add_argument("--nodes", type=int, default=20000)
    parser.add_argument("--time-limit", type=float, default=30.0)
    args = parser.parse_args()
    rows = []
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        chain = Path(tmp) / f"chain{args.nodes}.json"
        _chain(args.nodes, chain)
        for case, limit, argv in _cases(chain, args.time_limit):
            if args.only not in case:
                continue
            load = os.getloadavg()[0]
            row = _run(case, limit, argv, Path(tmp) / "r.json")
            row["load_1min"] = round(load, 1)
            print(row, flush=True)
            rows.append(row)
    results = REPO / "results"
    with open(results / "deadlines.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# Time limits on inputs too large to solve",
        "",
        f"Written by `{SCRIPT}` (`python {SCRIPT} --nodes {args.nodes} --time-limit {args.time_limit:g}"
        + (f" --only '{args.only}'" if args.only else "")
        + "`). Whole process, timed from outside, "
        f"on {platform.machine()} with {os.cpu_count()} cores, Python {platform.python_version()}; "
        "the machine was shared with other jobs: load average (1, 5, 15 min) "
        + ", ".join(f"{x:.1f}" for x in load_start)
        + " at the start and "
        + ", ".join(f"{x:.1f}" for x in os.getloadavg())
        + " at the end (load_1min: as each case started). Bar: 1.25 x limit + 10 s.",
        "",
        "| " + " | ".join(FIELDS) + " |",
        "|" + "---|" * len(FIELDS),
    ]
    lines += ["| " + " | ".join(str(r[f]) for f in FIELDS) + " |" for r in rows]
    (results / "deadlines.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r["within"] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
