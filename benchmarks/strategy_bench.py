"""Benchmark of layer-wise strategy search on PaSE's instances (shared/benchmarks/strategy/).

Writes ``results/strategy.md`` and ``results/strategy.csv``.  Without a memory limit:
the PaSE DP here and in PaSE (``optima.json``), the exact reductions, and CP-SAT cold
on the original model, cold on the reduced model and warm-started from the DP; CBC on
the reduced model.  With a binding memory limit (memory per configuration derived from
the layer shapes, fp32, optimizer factor 3; the limit halfway between the least memory
any choice needs and what the unconstrained optimum needs): the default chain (Lagrangian
bound, min-marginal fixing and the Pareto DP, a back-end only if those do not finish), and
CP-SAT and CBC with the Pareto DP off (fixing on).  Run from the repository root::

    python benchmarks/strategy_bench.py [--threads 2] [--time-limit 60]

The chart ``results/strategy.png`` (seconds per method, without and with the memory limit) is
embedded in the report; ``--plot-only`` re-renders report and chart from the CSVs, solving nothing.
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

from bench_charts import grouped_bars, pyplot, read_csv, save  # noqa: E402

from milp_partition.io.strategy_tables import read_strategy_tables  # noqa: E402
from milp_partition.strategy.dp import pase_dp  # noqa: E402
from milp_partition.strategy.memory import with_memory  # noqa: E402
from milp_partition.strategy.problem import StrategySolution  # noqa: E402
from milp_partition.strategy.reductions import reduce  # noqa: E402
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy  # noqa: E402
from milp_partition.verifiers.strategy import verify_strategy  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks" / "strategy"
MEMORY_CASES = ["alexnet_p8.json", "inception3_p4.json", "resnet101_p4.json", "transformer_p4.json", "transformer_p8.json"]


def _f(x, digits: int = 13) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _timed(problem, **kw):
    t0 = time.monotonic()
    res = solve_strategy(problem, StrategySolveSettings(**kw))
    return res, round(time.monotonic() - t0, 3)


def run_free(row_in: dict, args: argparse.Namespace) -> dict:
    name = row_in["file"]
    problem = read_strategy_tables(SHARED / name)
    row = {"instance": name, "layers": len(problem.nodes), "configs": problem.total_configs, "edges": len(problem.edges)}
    row["optimum_ref"] = row_in["optimum"]
    row["pase_dp_ref_s"] = row_in["pase_dp_seconds"]
    t0 = time.monotonic()
    dp = pase_dp(problem)
    row["dp_s"] = round(time.monotonic() - t0, 4)
    row["dp_value"] = dp.value
    t0 = time.monotonic()
    red = reduce(problem)
    dpr = pase_dp(red.problem)
    lifted = verify_strategy(problem, red.lift(dpr.solution)).objective if dpr.solution else None
    row["reduce_dp_s"] = round(time.monotonic() - t0, 4)
    row["reduce_dp_value"] = lifted
    row["reduced"] = f"{len(red.problem.nodes)}/{red.problem.total_configs}/{len(red.problem.edges)}"
    base = dict(threads=args.threads, time_limit_s=args.time_limit)
    for key, kw in (
        ("cpsat_original_cold", dict(solver="cpsat", reduce=False, heuristics=False)),
        ("cpsat_reduced_cold", dict(solver="cpsat", reduce=True, heuristics=False)),
        ("cpsat_reduced_warm", dict(solver="cpsat", reduce=True, heuristics=True)),
        ("cbc_reduced_cold", dict(solver="cbc", reduce=True, heuristics=False)),
    ):
        res, secs = _timed(problem, **base, **kw)
        row[f"{key}_status"], row[f"{key}_s"], row[f"{key}_objective"], row[f"{key}_bound"] = (
            res.status,
            secs,
            res.objective,
            res.bound,
        )
        print(f"  {name} {key}: {res.status} {res.objective} bound {res.bound} in {secs} s", file=sys.stderr)
    obj = row["cpsat_reduced_cold_objective"]
    row["rel_error"] = abs(obj - row_in["optimum"]) / row_in["optimum"] if obj is not None else None
    return row


def run_memory(row_in: dict, args: argparse.Namespace) -> dict:
    name = row_in["file"]
    free = with_memory(read_strategy_tables(SHARED / name))
    need = verify_strategy(free, StrategySolution(row_in["pase_choice"])).memory_bytes
    least = sum(int(n.memory_bytes.min()) for n in free.nodes)  # type: ignore[union-attr]
    limit = (least + int(need)) // 2
    problem = free.with_memory_limit(limit)
    row = {"instance": name, "least_memory": least, "unconstrained_memory": int(need), "limit": limit}
    row["configs"] = problem.total_configs
    res, secs = _timed(problem, solver="cpsat", threads=args.threads, time_limit_s=args.time_limit)
    row["chain_status"], row["chain_s"], row["chain_objective"] = res.status, secs, res.objective
    row["chain_bound"], row["chain_gap"] = res.bound, res.gap
    search = res.solver_notes.get("memory_search", {})
    row["chain_fixed_configs"] = search.get("configurations_after_fixing")
    row["chain_targets"] = search.get("targets")
    row["chain_reduced_configs"] = res.solver_notes.get("reduction", {}).get("configurations")
    row["chain_proof"] = "Pareto DP" if search.get("optimal") else ("cpsat" if res.status == "optimal" else "-")
    print(f"  {name} memory chain: {res.status} {res.objective} bound {res.bound} in {secs} s", file=sys.stderr)
    for solver in ("cpsat", "cbc"):
        res, secs = _timed(problem, solver=solver, threads=args.threads, time_limit_s=args.time_limit, memory_dp=False)
        row[f"{solver}_status"], row[f"{solver}_s"] = res.status, secs
        row[f"{solver}_objective"], row[f"{solver}_bound"], row[f"{solver}_gap"] = res.objective, res.bound, res.gap
        lag = {h.name: h for h in res.heuristics}.get("lagrangian")
        if lag is not None:
            row["lagrangian_value"], row["lagrangian_s"] = lag.objective, round(lag.seconds, 3)
        print(f"  {name} memory {solver}: {res.status} {res.objective} bound {res.bound} in {secs} s", file=sys.stderr)
    return row


def chart(free: list[dict], mem: list[dict]):
    """Seconds per method and instance (log): left without a memory limit, right with the binding limit; hatched: no proof."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [3, 1.4]})

    def col(rows: list[dict], key: str, status: str | None) -> tuple[list[float | None], list[bool]]:
        values = [None if r.get(key) is None else max(float(r[key]), 1e-4) for r in rows]
        return values, [status is None or r.get(status) == "optimal" for r in rows]

    free_series = [
        ("PaSE DP (ref.)", "pase_dp_ref_s", None),
        ("our DP", "dp_s", None),
        ("reduce + DP", "reduce_dp_s", None),
        ("CP-SAT original cold", "cpsat_original_cold_s", "cpsat_original_cold_status"),
        ("CP-SAT reduced cold", "cpsat_reduced_cold_s", "cpsat_reduced_cold_status"),
        ("CP-SAT reduced warm", "cpsat_reduced_warm_s", "cpsat_reduced_warm_status"),
        ("CBC reduced cold", "cbc_reduced_cold_s", "cbc_reduced_cold_status"),
    ]
    grouped_bars(
        ax1, [r["instance"].removesuffix(".json") for r in free], [(lab, *col(free, k, st)) for lab, k, st in free_series]
    )
    ax1.set_ylabel("seconds")
    ax1.set_title("without a memory limit (hatched, pale: limit reached without proof)", fontsize=9)
    mem_series = [
        ("default chain", "chain_s", "chain_status"),
        ("CP-SAT", "cpsat_s", "cpsat_status"),
        ("CBC", "cbc_s", "cbc_status"),
    ]
    grouped_bars(ax2, [r["instance"].removesuffix(".json") for r in mem], [(lab, *col(mem, k, st)) for lab, k, st in mem_series])
    ax2.set_ylabel("seconds")
    ax2.set_title("with a binding memory limit", fontsize=9)
    fig.tight_layout()
    return fig


def write(free: list[dict], mem: list[dict], args: argparse.Namespace) -> None:
    out = REPO / "results"
    out.mkdir(exist_ok=True)
    if not args.plot_only:
        for rows, fname in ((free, "strategy.csv"), (mem, "strategy_memory.csv")):
            keys = sorted({k for r in rows for k in r} - {"instance"})
            with open(out / fname, "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=["instance", *keys])
                w.writeheader()
                w.writerows(rows)
    png = save(chart(free, mem), out / "strategy.png")
    lines = [
        "<!-- generated by benchmarks/strategy_bench.py; do not edit by hand -->",
        "# Layer-wise parallelization strategies: PaSE's instances",
        "",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, {args.threads} threads, time limit {args.time_limit:g} s. "
        "Times are wall-clock seconds end to end (reading excluded). PaSE DP (ref.) is PaSE's own Python DP from `optima.json`, "
        "measured on another run of this kind of machine.",
        "",
        *(
            ["Re-rendered from `strategy.csv` and `strategy_memory.csv` by `--plot-only` (nothing ran).", ""]
            if args.plot_only
            else []
        ),
        f"![{png}]({png})",
        "",
        "## Without a memory limit",
        "",
        "*reduced*: layers/configurations/edges after the exact reductions (dominance, series merge, leaf fold). "
        "CP-SAT *original cold*: the one-hot model of the whole instance, no reduction, no hint. *reduced cold*: reductions, no hint. "
        "*reduced warm*: reductions, DPs, hint.",
        "",
        "| instance | layers | configs | edges | reduced | PaSE DP (ref.) s | our DP s | reduce+DP s | optimum (verified) | rel. error | "
        "CP-SAT original cold | CP-SAT reduced cold s | CP-SAT reduced warm s | CBC reduced cold s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in free:
        orig = r["cpsat_original_cold_status"]
        orig_txt = f"{r['cpsat_original_cold_s']} s" if orig == "optimal" else f"{orig} after {r['cpsat_original_cold_s']} s"
        lines.append(
            f"| {r['instance']} | {r['layers']} | {r['configs']} | {r['edges']} | {r['reduced']} | {r['pase_dp_ref_s']} | {r['dp_s']} | "
            f"{r['reduce_dp_s']} | {_f(r['cpsat_reduced_cold_objective'])} ({r['cpsat_reduced_cold_status']}) | {_f(r['rel_error'], 3)} | "
            f"{orig_txt} | {r['cpsat_reduced_cold_s']} | {r['cpsat_reduced_warm_s']} | "
            f"{r['cbc_reduced_cold_s'] if r['cbc_reduced_cold_status'] == 'optimal' else r['cbc_reduced_cold_status']} |"
        )
    lines += [
        "",
        "## With a binding memory limit",
        "",
        "Memory per configuration from the layer shapes (`milp_partition/strategy_memory.py`: fp32, parameters x 3 for optimizer "
        "state, output activations kept). The limit lies halfway between the least memory any choice needs and what PaSE's "
        "unconstrained optimum needs, so it binds. The bound is the best of the solver's, the Lagrangian relaxation's "
        "(`heuristics/strategy_lagrangian.py`) and the targets the Pareto DP proved empty, all proven.",
        "",
        "*Default chain*: dominance, the Lagrangian bound, then the Pareto DP (`milp_partition/strategy/pareto_dp.py`) at growing "
        "targets above the bound, each after min-marginal fixing (`heuristics/strategy_marginals.py`); *configs*: original / "
        "after dominance / after fixing at the last target; *s*: end to end, to the proof when optimal. "
        "*CP-SAT*, *CBC*: the same chain with the Pareto DP off (fixing at the incumbent's cost on), the back-end proving.",
        "",
        "| instance | limit (bytes) | unconstrained needs | Lagrangian choice | configs | default chain | bound | gap | s | "
        "CP-SAT | bound | gap | s | CBC | bound | gap | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in mem:
        lines.append(
            f"| {r['instance']} | {r['limit']} | {r['unconstrained_memory']} | {_f(r.get('lagrangian_value'))} | "
            f"{r['configs']} / {_f(r['chain_reduced_configs'])} / {_f(r['chain_fixed_configs'])} | "
            f"{_f(r['chain_objective'])} ({r['chain_status']}, {r['chain_proof']}) | {_f(r['chain_bound'])} | "
            f"{_f(r['chain_gap'], 3)} | {r['chain_s']} | "
            f"{_f(r['cpsat_objective'])} ({r['cpsat_status']}) | {_f(r['cpsat_bound'])} | {_f(r['cpsat_gap'], 3)} | {r['cpsat_s']} | "
            f"{_f(r['cbc_objective'])} ({r['cbc_status']}) | {_f(r['cbc_bound'])} | {_f(r['cbc_gap'], 3)} | {r['cbc_s']} |"
        )
    (out / "strategy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--only", help="substring of the file names to run")
    ap.add_argument("--plot-only", action="store_true", help="re-render the report and the chart from the CSVs; solve nothing")
    args = ap.parse_args()
    if args.plot_only:
        out = REPO / "results"
        write(read_csv(out / "strategy.csv"), read_csv(out / "strategy_memory.csv"), args)
        return
    optima = json.loads((SHARED / "optima.json").read_text())
    chosen = [r for r in optima if not args.only or args.only in r["file"]]
    free = [run_free(r, args) for r in chosen]
    mem = [run_memory(r, args) for r in chosen if r["file"] in MEMORY_CASES]
    write(free, mem, args)


if __name__ == "__main__":
    main()
