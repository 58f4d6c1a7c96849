"""Benchmark of exact pipeline partitioning on the Tarnawski et al. (NeurIPS 2020) instances.

Writes ``results/pipeline.md`` and ``results/pipeline.csv``.  For every instance:
nodes, edges, k, each DP's value and time, the exact optimum with its bound, and
the time to a proven optimum cold (no heuristic, no hint) and warm-started (DP
hint and upper bound), with CP-SAT and with CBC.  Run from the repository root::

    python benchmarks/pipeline_bench.py [--threads 2] [--time-limit 60] [--cbc-time-limit 120] [--only NAME | --wide-only]

The chart ``results/pipeline.png`` (seconds to the proof per solver and start; the DPs' excess over
the optimum) is embedded in the report; ``--plot-only`` re-renders report and chart from the CSVs
without solving anything.

A partial run (``--only NAME``, ``--skip-wide``) merges: the rows it runs replace theirs in the committed
``results/pipeline.csv`` (``results/pipeline_wide.csv`` for the wide graphs), the others are kept, and each row
carries the limits it ran under (the table says which rows come from an earlier run).
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_charts import pyplot, save  # noqa: E402

from milp_partition.io import read_instance  # noqa: E402
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings  # noqa: E402
from milp_partition.pipeline.solve import SolveSettings, solve_pipeline  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks" / "pipeline"
#: Reference optima of the contiguous variant (shared/benchmarks/README.md).
REFERENCE = json.loads((REPO / "benchmarks" / "pipeline_reference.json").read_text())["optima"]


def _problem(rel: str, contiguous: bool = True) -> PipelineProblem:
    inst = read_instance(SHARED / rel)
    assert inst.cluster is not None
    return PipelineProblem(inst.graph, inst.cluster, PipelineSettings(contiguous=contiguous), source=rel)


def run(rel: str, args: argparse.Namespace) -> dict:
    problem = _problem(rel)
    row: dict = {
        "instance": rel,
        "nodes": len(problem.graph.nodes),
        "edges": len(problem.graph.edges),
        "k": len(problem.cluster.devices),
        "reference": REFERENCE[rel],
    }
    heur = solve_pipeline(problem, SolveSettings(solver="none", max_ideals=args.max_ideals))
    for h in heur.heuristics:
        row[f"{h.name}_value"] = h.objective
        row[f"{h.name}_s"] = round(h.seconds, 3)
        row[f"{h.name}_exact"] = h.exact
    for solver, limit in (("cpsat", args.time_limit), ("cbc", args.cbc_time_limit)):
        if solver == "cbc" and args.skip_cbc:
            continue
        for mode, warm in (("cold", False), ("warm", True)):
            t0 = time.monotonic()
            res = solve_pipeline(
                problem,
                SolveSettings(
                    solver=solver,
                    time_limit_s=limit,
                    threads=args.threads,
                    warm_start=warm,
                    heuristics=warm,
                    max_ideals=args.max_ideals,
                ),
            )
            row[f"{solver}_{mode}_status"] = res.status
            row[f"{solver}_{mode}_objective"] = res.objective
            row[f"{solver}_{mode}_bound"] = res.bound
            row[f"{solver}_{mode}_s"] = round(time.monotonic() - t0, 2)
            row[f"{solver}_{mode}_solver_s"] = round(res.solver_seconds, 2)
            if warm:
                row[f"{solver}_first_incumbent"] = res.warm_start.get("first_incumbent")
            print(
                f"  {rel} {solver} {mode}: {res.status} {res.objective} bound {res.bound} in {row[f'{solver}_{mode}_s']} s",
                file=sys.stderr,
            )
    best = row.get("cpsat_cold_objective") or row.get("cpsat_warm_objective")
    row["rel_error"] = abs(best - REFERENCE[rel]) / REFERENCE[rel] if best is not None else None
    return row


#: Wide Inception-like graphs (seed, blocks, branches, max depth) on 6 accelerators of 16 GiB: beyond the ideal DP's cap.
WIDE = [(1, 11, 6, 5), (2, 20, 6, 5), (3, 30, 6, 5)]


def run_wide(spec: tuple[int, int, int, int], args: argparse.Namespace) -> dict:
    from milp_partition.cluster import homogeneous_cluster
    from milp_partition.pipeline.generators import InceptionLikeSettings, inception_like

    seed, blocks, branches, depth = spec
    graph = inception_like(seed, InceptionLikeSettings(blocks=blocks, branches=branches, max_depth=depth))
    problem = PipelineProblem(graph, homogeneous_cluster(6, 16 * 2**30), PipelineSettings(), source=graph.name)
    t0 = time.monotonic()
    res = solve_pipeline(
        problem,
        SolveSettings(solver="cpsat", time_limit_s=args.wide_time_limit, threads=args.threads, max_ideals=args.max_ideals),
    )
    row = {
        "instance": f"{graph.name} (branches {branches}, depth <= {depth})",
        "nodes": len(graph.nodes),
        "edges": len(graph.edges),
        "k": 6,
        "status": res.status,
        "objective": res.objective,
        "bound": res.bound,
        "gap": res.gap,
        "seconds": round(time.monotonic() - t0, 2),
    }
    for h in res.heuristics:
        row[f"{h.name}_value"] = h.objective
        row[f"{h.name}_s"] = round(h.seconds, 3)
        row[f"{h.name}_message"] = h.message
    print(f"  {row['instance']}: {res.status} {res.objective} bound {res.bound} in {row['seconds']} s", file=sys.stderr)
    return row


def _f(x, digits: int = 10) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _value(text: str) -> object:
    """A CSV cell back as the number, bool or None it was written from."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_rows(path: Path) -> list[dict]:
    """Rows of a CSV this script wrote (empty when the file is absent)."""
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return [{k: _value(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def merge_rows(old: list[dict], new: list[dict], order: list[str] | None = None) -> list[dict]:
    """``old`` with the rows of ``new`` put in place of those of the same instance (new ones appended, or in ``order``)."""
    by_name = {r["instance"]: r for r in old}
    for r in new:  # field by field: a column this run skipped (absent: --skip-cbc) keeps its earlier value; one it
        # ran and left empty (None: no incumbent, DP over its cap) is empty, not an earlier run's value
        by_name[r["instance"]] = {**by_name.get(r["instance"], {}), **r}
    if order is not None:
        return [by_name[name] for name in order if name in by_name] + [r for n, r in by_name.items() if n not in order]
    return list(by_name.values())


def _write_csv(path: Path, rows: list[dict]) -> None:
    keys = sorted({k for r in rows for k in r})
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["instance", *[k for k in keys if k != "instance"]])
        w.writeheader()
        w.writerows(rows)


def chart(rows: list[dict], wide: list[dict]):
    """Left: seconds to the proof (log) per instance, CP-SAT and CBC, cold and warm, hatched where no proof came;
    right: the chain and ideal DPs' excess over the optimum (%)."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    names = [r["instance"].split("/")[-1].removesuffix(".json") for r in rows] + [r["instance"].split(" ")[0] for r in wide]
    series = [("CP-SAT cold", "cpsat_cold"), ("CP-SAT warm", "cpsat_warm"), ("CBC cold", "cbc_cold"), ("CBC warm", "cbc_warm")]
    cmap = plt.get_cmap("tab10")
    width = 0.8 / len(series)
    for j, (label, key) in enumerate(series):
        for i, r in enumerate([*rows, *wide]):
            is_wide = i >= len(rows)
            seconds = r.get("seconds") if is_wide and key == "cpsat_warm" else None if is_wide else r.get(f"{key}_s")
            status = r.get("status") if is_wide else r.get(f"{key}_status")
            if seconds is None:
                continue
            proven = status in ("optimal", "infeasible")
            x = i + (j - (len(series) - 1) / 2) * width
            ax1.bar(x, float(seconds), width=width, color=cmap(j), hatch=None if proven else "//", edgecolor="white",
                    alpha=1.0 if proven else 0.5, label=label if i == 0 or (is_wide and j == 1 and not rows) else None)  # fmt: skip
    ax1.set_yscale("log")
    ax1.set_xticks(range(len(names)))
    ax1.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax1.set_ylabel("seconds (end to end)")
    ax1.set_title("time to a proven optimum (hatched, pale: limit reached without proof); wide graphs: CP-SAT warm", fontsize=9)
    ax1.grid(axis="y", alpha=0.3)
    ax1.legend(fontsize=8)
    for j, (label, key) in enumerate((("chain DP", "chain_dp_value"), ("ideal DP", "ideal_dp_value"))):
        xs, hs = [], []
        for i, r in enumerate([*rows, *wide]):
            best = r.get("cpsat_warm_objective") if i < len(rows) else r.get("objective")
            status = r.get("cpsat_warm_status") if i < len(rows) else r.get("status")
            if r.get(key) is None or best is None or status != "optimal":
                continue
            xs.append(i + (j - 0.5) * 0.4)
            hs.append(100 * (float(r[key]) / float(best) - 1))
        ax2.bar(xs, hs, width=0.4, color=cmap(4 + j), label=label)
    ax2.set_xticks(range(len(names)))
    ax2.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax2.set_ylabel("excess over the proven optimum (%)")
    ax2.set_title("DPs: excess over the optimum (no bar: 0; ideal DP over its cap on wide graphs)", fontsize=9)
    ax2.grid(axis="y", alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


def write_tables(rows: list[dict], wide: list[dict], args: argparse.Namespace) -> None:
    out = REPO / "results"
    out.mkdir(exist_ok=True)
    ran = {r["instance"] for r in rows} | {r["instance"] for r in wide}
    rows = merge_rows(read_rows(out / "pipeline.csv"), rows, list(REFERENCE))
    wide = merge_rows(read_rows(out / "pipeline_wide.csv"), wide)
    _write_csv(out / "pipeline.csv", rows)
    if wide:
        _write_csv(out / "pipeline_wide.csv", wide)
    earlier = [] if args.plot_only else [r["instance"] for r in [*rows, *wide] if r["instance"] not in ran]
    png = save(chart(rows, wide), out / "pipeline.png")
    lines = [
        "<!-- generated by benchmarks/pipeline_bench.py; do not edit by hand -->",
        "# Pipeline partitioning: Tarnawski et al. (NeurIPS 2020) instances",
        "",
        f"Machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"threads {args.threads}, CP-SAT limit {args.time_limit:g} s, CBC limit {args.cbc_time_limit:g} s, "
        f"ideal-DP cap {args.max_ideals} ideals. Times are wall-clock seconds end to end (DPs, model building, solve, verification).",
        "",
        *(
            [
                f"Kept from an earlier run (a partial run merges; limits per row in the CSV): {', '.join(earlier)}.",
                "",
            ]
            if earlier
            else []
        ),
        *(
            [
                "Re-rendered from `pipeline.csv` and `pipeline_wide.csv` by `--plot-only` (nothing ran; limits per row in the CSV).",
                "",
            ]
            if args.plot_only
            else []
        ),
        "Contiguous variant. *cold*: no heuristic, no hint. *warm*: both DPs run first; the better one hints the solver "
        "and bounds the objective from above.  Objectives are the verifier's values.",
        "",
        f"![{png}]({png})",
        "",
        "| instance | nodes | edges | k | chain DP | s | ideal DP | s | CP-SAT optimum | bound | reference | rel. error | CP-SAT cold s | CP-SAT warm s | CBC cold | CBC warm |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cbc = []
        for mode in ("cold", "warm"):
            st = r.get(f"cbc_{mode}_status")
            cbc.append(
                "-"
                if st is None
                else (
                    f"{r[f'cbc_{mode}_s']} s"
                    if st == "optimal"
                    else f"{st} ({_f(r.get(f'cbc_{mode}_objective'), 7)} / {_f(r.get(f'cbc_{mode}_bound'), 7)})"
                )
            )
        lines.append(
            f"| {r['instance']} | {r['nodes']} | {r['edges']} | {r['k']} | {_f(r.get('chain_dp_value'))} | {_f(r.get('chain_dp_s'))} "
            f"| {_f(r.get('ideal_dp_value'))} | {_f(r.get('ideal_dp_s'))} | {_f(r.get('cpsat_warm_objective'))} "
            f"({r.get('cpsat_warm_status')}) | {_f(r.get('cpsat_warm_bound'))} | {_f(r['reference'])} | {_f(r.get('rel_error'), 3)} "
            f"| {_f(r.get('cpsat_cold_s'))} | {_f(r.get('cpsat_warm_s'))} | {cbc[0]} | {cbc[1]} |"
        )
    if wide:
        lines += [
            "",
            "## Wider graphs: beyond the ideal DP",
            "",
            "Seeded Inception-like layer graphs (`milp_partition.generators.inception_like`): blocks of parallel branches whose "
            f"ideals exceed the ideal DP's cap of {args.max_ideals}. CP-SAT, warm-started from the chain DP, {args.threads} threads, "
            f"limit {args.wide_time_limit:g} s.",
            "",
            "| instance | nodes | edges | k | chain DP | ideal DP | CP-SAT | status | bound | gap | seconds |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in wide:
            ideal = _f(r.get("ideal_dp_value")) if r.get("ideal_dp_value") is not None else "cap exceeded"
            lines.append(
                f"| {r['instance']} | {r['nodes']} | {r['edges']} | {r['k']} | {_f(r.get('chain_dp_value'))} | {ideal} | "
                f"{_f(r['objective'])} | {r['status']} | {_f(r['bound'])} | {_f(r['gap'], 3)} | {r['seconds']} |"
            )
    (out / "pipeline.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--cbc-time-limit", type=float, default=120.0)
    ap.add_argument("--max-ideals", type=int, default=20000)
    ap.add_argument("--skip-cbc", action="store_true")
    ap.add_argument("--wide-time-limit", type=float, default=300.0)
    ap.add_argument("--skip-wide", action="store_true")
    ap.add_argument("--only", help="substring of the instance names to run")
    ap.add_argument("--wide-only", action="store_true", help="run only the wide generated graphs")
    ap.add_argument("--plot-only", action="store_true", help="re-render the report and the chart from the CSVs; solve nothing")
    args = ap.parse_args()
    if args.plot_only:
        write_tables([], [], args)
        return
    limits = {"time_limit_s": args.time_limit, "cbc_time_limit_s": None if args.skip_cbc else args.cbc_time_limit}
    rows = [] if args.wide_only else [{**run(rel, args), **limits} for rel in REFERENCE if not args.only or args.only in rel]
    wide = (
        [] if args.skip_wide or args.only else [{**run_wide(spec, args), "time_limit_s": args.wide_time_limit} for spec in WIDE]
    )
    write_tables(rows, wide, args)


if __name__ == "__main__":
    main()
