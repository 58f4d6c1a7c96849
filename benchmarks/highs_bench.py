"""HiGHS (highspy) against CBC on a representative subset of the MILP benchmarks (issue 41, item 3).

Writes ``results/highs_vs_cbc.md`` and ``results/highs_vs_cbc.csv``.  The same chain, the same model, the same time
limit and threads, only ``--solver`` differs; objectives are the verifier's, bounds proven (the chain's policy).
Cases: the pipeline model cold (no heuristic, no hint; the Tarnawski et al. instances CBC proves in 20-60 s,
``results/pipeline.md``); the strategy model under a binding memory limit with the Pareto DP off (the limits of
``results/strategy_memory.csv``: CBC proves two, runs out of time on two); the placement model's linear
(disjunctive) variant on Moirai's example-1.  Run from the repository root (needs the ``highs`` extra)::

    python benchmarks/highs_bench.py [--time-limit 60] [--threads 1] [--only NAME]
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from milp_partition.io import read_instance  # noqa: E402
from milp_partition.io.placement_instance import read_placement_instance  # noqa: E402
from milp_partition.io.strategy_tables import read_strategy_tables  # noqa: E402
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings  # noqa: E402
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline  # noqa: E402
from milp_partition.placement.solve import PlacementSolveSettings, solve_placement  # noqa: E402
from milp_partition.strategy.memory import with_memory  # noqa: E402
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks"
SOLVERS = ("cbc", "highs")
PIPELINE = ("LayerGraphs/bert24_inference.json", "LayerGraphs/bert24_training.json", "OperatorGraphs/bert_l-3_inference.json")
STRATEGY = ("alexnet_p8.json", "inception3_p4.json", "resnet101_p4.json", "transformer_p8.json")
PLACEMENT = ("example-1.json",)
FIELDS = ["problem", "instance", "solver", "status", "objective", "bound", "gap", "seconds", "solver_seconds", "load"]


def _strategy_limits() -> dict[str, int]:
    with (REPO / "results" / "strategy_memory.csv").open(newline="") as f:
        return {r["instance"]: int(r["limit"]) for r in csv.DictReader(f)}


def cases(time_limit: float, threads: int):
    """(problem, instance, solve(solver) -> Result) for every case."""
    for rel in PIPELINE:
        inst = read_instance(SHARED / "pipeline" / rel)
        problem = PipelineProblem(inst.graph, inst.cluster, PipelineSettings(contiguous=True), source=rel)

        def pipe(solver: str, problem=problem):
            settings = SolveSettings(solver=solver, time_limit_s=time_limit, threads=threads, warm_start=False, heuristics=False)
            return solve_pipeline(problem, settings)

        yield "pipeline (cold)", rel, pipe
    limits = _strategy_limits()
    for name in STRATEGY:
        problem = with_memory(read_strategy_tables(SHARED / "strategy" / name)).with_memory_limit(limits[name])

        def strat(solver: str, problem=problem):
            settings = StrategySolveSettings(solver=solver, time_limit_s=time_limit, threads=threads, memory_dp=False)
            return solve_strategy(problem, settings)

        yield "strategy (memory limit)", name, strat
    for name in PLACEMENT:
        problem = read_placement_instance(SHARED / "placement" / name)

        def place(solver: str, problem=problem):
            return solve_placement(problem, PlacementSolveSettings(solver=solver, time_limit_s=time_limit, threads=threads))

        yield "placement (disjunctive)", name, place


def run(args: argparse.Namespace) -> list[dict]:
    rows = []
    for problem, instance, solve in cases(args.time_limit, args.threads):
        if args.only and args.only not in instance:
            continue
        for solver in SOLVERS:
            t0 = time.monotonic()
            res = solve(solver)
            row = {
                "problem": problem,
                "instance": instance,
                "solver": solver,
                "status": res.status.value if hasattr(res.status, "value") else str(res.status),
                "objective": res.objective,
                "bound": res.bound,
                "gap": res.gap,
                "seconds": round(time.monotonic() - t0, 2),
                "solver_seconds": round(res.solver_seconds, 2),
                "load": round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else "",
            }
            print(f"  {problem} {instance} {solver}: {row['status']} {row['objective']} bound {row['bound']} in {row['seconds']} s",
                  file=sys.stderr)  # fmt: skip
            rows.append(row)
    return rows


def _num(x: object) -> float:
    """A CSV or result figure as a float (``-inf`` when missing: no incumbent / no bound)."""
    try:
        return float(x) if x not in (None, "") else -float("inf")
    except (TypeError, ValueError):
        return -float("inf")


def _f(x: object, digits: int = 10) -> str:
    if x is None or x == "":
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def write(rows: list[dict], args: argparse.Namespace, out: Path) -> None:
    with (out / "highs_vs_cbc.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    by = {(r["problem"], r["instance"], r["solver"]): r for r in rows}
    keys = list(dict.fromkeys((r["problem"], r["instance"]) for r in rows))
    loads = [_num(r.get("load")) for r in rows if _num(r.get("load")) > -float("inf")]
    load = f"{min(loads):.1f} to {max(loads):.1f}" if loads else "not recorded"
    lines = [
        "<!-- generated by benchmarks/highs_bench.py; do not edit by hand -->",
        "# HiGHS against CBC on the MILP benchmarks",
        "",
        f"Machine: {platform.machine()}, CPython {platform.python_version()}, threads {args.threads}, limit {args.time_limit:g} s "
        f"per solve, 1-minute load average {load} as the solves ended (a shared 2-core machine: times are noisy). Command: "
        f"`python benchmarks/highs_bench.py --time-limit {args.time_limit:g} --threads {args.threads}`.",
        "",
        "The same chain and model, only `--solver` differs; objectives are the verifier's, bounds proven; *s*: end to end.",
        "",
        "| problem | instance | CBC | bound | s | HiGHS | bound | s | same optimum |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    better = {"incumbent": 0, "bound": 0, "proof": 0}
    worse = {"incumbent": 0, "bound": 0, "proof": 0}
    for key in keys:
        c, h = by.get((*key, "cbc")), by.get((*key, "highs"))
        if c is None or h is None:
            continue
        for what, ours, theirs in (
            ("incumbent", -_num(h["objective"]), -_num(c["objective"])),
            ("bound", _num(h["bound"]), _num(c["bound"])),
        ):
            better[what] += ours > theirs * (1 + 1e-9) + 1e-12 if theirs > 0 else ours > theirs
            worse[what] += theirs > ours * (1 + 1e-9) + 1e-12 if ours > 0 else theirs > ours
        if c["status"] == h["status"] == "optimal":
            better["proof"] += float(h["seconds"]) < float(c["seconds"])
            worse["proof"] += float(c["seconds"]) < float(h["seconds"])
    lines[-4:-4] = [
        f"HiGHS against CBC over {len(keys)} cases: a better incumbent in {better['incumbent']} (worse in "
        f"{worse['incumbent']}), a higher proven bound in {better['bound']} (lower in {worse['bound']}), of the cases both "
        f"prove, faster in {better['proof']} (slower in {worse['proof']}).",
        "",
    ]
    for key in keys:
        c, h = by.get((*key, "cbc")), by.get((*key, "highs"))
        if c is None or h is None:
            continue
        same = "-"
        if c["status"] == h["status"] == "optimal":
            same = "yes" if abs(c["objective"] - h["objective"]) <= 1e-6 * max(1.0, abs(c["objective"])) else "NO"
        lines.append(
            f"| {key[0]} | {key[1]} | {_f(c['objective'])} ({c['status']}) | {_f(c['bound'])} | {c['seconds']} | "
            f"{_f(h['objective'])} ({h['status']}) | {_f(h['bound'])} | {h['seconds']} | {same} |"
        )
    (out / "highs_vs_cbc.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", help="run the instances whose name contains this only")
    ap.add_argument("--out", type=Path, default=REPO / "results")
    ap.add_argument("--from-csv", action="store_true", help="re-render the report from OUT/highs_vs_cbc.csv, solving nothing")
    args = ap.parse_args()
    if args.from_csv:
        with (args.out / "highs_vs_cbc.csv").open(newline="") as f:
            rows = [
                {k: (v if k in ("problem", "instance", "solver", "status") else _num(v)) for k, v in r.items()}
                for r in csv.DictReader(f)
            ]
    else:
        rows = run(args)
    write(rows, args, args.out)
    print(f"wrote {args.out / 'highs_vs_cbc.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
