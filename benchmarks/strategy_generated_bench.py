"""Benchmark of strategy problems generated from layer shapes, the liveness memory model, and tied blocks.

Writes ``results/strategy_generated.md`` and ``results/strategy_generated.csv``:

1. GPT-style stacks (:func:`milp_partition.strategy_layers.transformer_layer_graph`) costed
   with the H100 datasheet profile at p = 4 and 8: size, the PaSE DP's time and value,
   CP-SAT cold (no DP, no hint) on the reduced model.
2. The same stacks under a binding memory limit, static and liveness models (halfway, in each
   model's measure, between the peak of the all-smallest choice and the unconstrained
   optimum's): the default solve chain.
3. Tied blocks (``--tie-blocks``) against the exact answer on PaSE's transformer and
   ResNet instances, without and with the binding memory limit of ``strategy_bench.py``:
   the loss of tying where both finish.

Run from the repository root::

    python benchmarks/strategy_generated_bench.py [--threads 2] [--time-limit 60]

The chart ``results/strategy_generated.png`` (solve times under the memory limits; the loss of
tying) is embedded in the report; ``--plot-only`` re-renders report and chart from the CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_charts import csv_value, grouped_bars, pyplot, save  # noqa: E402

from milp_partition.calibration.profile import datasheet_profile  # noqa: E402
from milp_partition.io.strategy_tables import read_strategy_tables  # noqa: E402
from milp_partition.strategy.dp import pase_dp  # noqa: E402
from milp_partition.strategy.layers import StrategyGenerationSettings, generate_strategy_problem, transformer_layer_graph  # noqa: E402
from milp_partition.strategy.memory import with_memory  # noqa: E402
from milp_partition.strategy.problem import StrategySolution  # noqa: E402
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy  # noqa: E402
from milp_partition.verifiers.strategy import verify_strategy  # noqa: E402

SHARED = REPO.parent / "shared" / "benchmarks" / "strategy"
STACKS = [  # (blocks, hidden, heads, sequence, samples)
    (4, 2048, 16, 1024, 8),
    (12, 4096, 32, 2048, 4),
    (24, 4096, 32, 2048, 4),
]
TIE_CASES = ["transformer_p4.json", "transformer_p8.json", "resnet101_p4.json"]


def _f(x, digits: int = 10) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _solve(problem, **kw):
    t0 = time.monotonic()
    res = solve_strategy(problem, StrategySolveSettings(**kw))
    return res, round(time.monotonic() - t0, 3)


def _binding(problem, model: str):
    """The problem under ``model`` with a limit halfway between two peaks of that model: the least-memory choice's
    (every layer at its smallest configuration, which then fits) and the unconstrained optimum's."""
    problem = replace(problem, memory_model=model)
    dp = pase_dp(problem)
    need = verify_strategy(problem, dp.solution).memory_bytes
    smallest = StrategySolution({n.id: n.configs[int(n.memory_bytes.argmin())] for n in problem.nodes})
    least = verify_strategy(problem, smallest).memory_bytes
    return problem.with_memory_limit(int(least + need) // 2)


def run_generated(args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    profile = datasheet_profile("H100")
    free_rows, mem_rows = [], []
    for blocks, hidden, heads, seq, samples in STACKS:
        graph = transformer_layer_graph(blocks, batch_tokens=samples * seq, seq=seq, hidden=hidden, heads=heads, vocab=50304)
        for p in (4, 8):
            problem = generate_strategy_problem(graph, profile, StrategyGenerationSettings(devices=p))
            name = f"gpt-{blocks}x{hidden} p{p}"
            dp = pase_dp(problem)
            res, secs = _solve(problem, threads=args.threads, time_limit_s=args.time_limit, heuristics=False, warm_start=False)
            row = {
                "instance": name,
                "layers": len(problem.nodes),
                "configs": problem.total_configs,
                "edges": len(problem.edges),
                "dp_value_s": dp.value,
                "dp_s": round(dp.seconds, 4),
                "cpsat_status": res.status,
                "cpsat_value_s": res.objective,
                "cpsat_s": secs,
            }
            free_rows.append(row)
            print(
                f"  {name}: DP {dp.value:.6g} in {dp.seconds:.3f} s; CP-SAT {res.status} {res.objective} in {secs} s",
                file=sys.stderr,
            )
            for model, solver in (("static", "cpsat"), ("liveness", "cpsat"), ("liveness", "cbc")):
                mp = _binding(problem, model)
                res, secs = _solve(mp, solver=solver, threads=args.threads, time_limit_s=args.time_limit)
                mem_rows.append(
                    {
                        "instance": name,
                        "memory_model": model,
                        "solver": solver,
                        "limit_bytes": mp.memory_limit_bytes,
                        "unconstrained_s": dp.value,
                        "status": res.status,
                        "objective_s": res.objective,
                        "bound_s": res.bound,
                        "gap": res.gap,
                        "seconds": secs,
                        "message": res.message,
                    }
                )
                print(f"  {name} {model} {solver}: {res.status} {res.objective} bound {res.bound} in {secs} s", file=sys.stderr)
    return free_rows, mem_rows


def run_ties(args: argparse.Namespace) -> list[dict]:
    optima = {r["file"]: r for r in json.loads((SHARED / "optima.json").read_text())}
    rows = []
    for name in TIE_CASES:
        free = with_memory(read_strategy_tables(SHARED / name))
        need = verify_strategy(free, StrategySolution(optima[name]["pase_choice"])).memory_bytes
        least = sum(int(n.memory_bytes.min()) for n in free.nodes)
        for label, problem in (
            ("none", free.with_memory_limit(None)),
            ("binding", free.with_memory_limit((least + int(need)) // 2)),
        ):
            exact, exact_s = _solve(problem, threads=args.threads, time_limit_s=args.time_limit)
            tied, tied_s = _solve(problem, threads=args.threads, time_limit_s=args.time_limit, tie_blocks=True, reduce=False)
            ties = tied.solver_notes.get("ties", {})
            loss = None
            if exact.status == "optimal" and tied.objective is not None:
                loss = (tied.objective - exact.objective) / exact.objective
            rows.append(
                {
                    "instance": name,
                    "memory_limit": label,
                    "exact_status": exact.status,
                    "exact_objective": exact.objective,
                    "exact_s": exact_s,
                    "tied_layers": ties.get("layers"),
                    "tied_groups": ties.get("groups"),
                    "tied_problem_layers": ties.get("tied_layers"),
                    "tied_problem_status": ties.get("tied_status"),
                    "tied_problem_objective": ties.get("tied_objective"),
                    "tied_objective": tied.objective,
                    "tied_s": tied_s,
                    "loss": loss,
                }
            )
            print(
                f"  ties {name} {label}: exact {exact.status} {exact.objective}; tied {tied.objective} ({ties}); loss {loss}",
                file=sys.stderr,
            )
    return rows


def read_tables(path: Path) -> dict[str, list[dict]]:
    """The three tables of the CSV :func:`write` wrote (a ``# name`` line, a header, rows), values parsed."""
    if not path.is_file():
        raise SystemExit(f"{path}: no such CSV; run the benchmark without --plot-only first")
    tables: dict[str, list[dict]] = {}
    name, header = "", None
    with open(path, newline="") as fh:
        for cells in csv.reader(fh):
            if len(cells) == 1 and cells[0].startswith("# "):
                name, header = cells[0][2:], None
                tables[name] = []
            elif header is None:
                header = cells
            else:
                tables[name].append({k: csv_value(v) for k, v in zip(header, cells)})
    return tables


def chart(mem: list[dict], ties: list[dict]):
    """Left: seconds of each memory-limited solve (hatched: no proof); right: the loss of tied blocks against the optimum."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [2, 1]})
    instances = list(dict.fromkeys(r["instance"] for r in mem))
    series = []
    for model, solver, label in (("static", "cpsat", "static, default chain"), ("liveness", "cpsat", "liveness, CP-SAT"),
                                 ("liveness", "cbc", "liveness, CBC")):  # fmt: skip
        rows = [next((r for r in mem if r["instance"] == i and r["memory_model"] == model and r["solver"] == solver), None)
                for i in instances]  # fmt: skip
        series.append(
            (
                label,
                [None if r is None else float(r["seconds"]) for r in rows],
                [r is not None and r["status"] == "optimal" for r in rows],
            )
        )
    grouped_bars(ax1, instances, series)
    ax1.set_ylim(top=2000)  # room for the legend above the bars
    ax1.set_ylabel("seconds")
    ax1.set_title("GPT-style stacks under a binding memory limit (hatched, pale: no proof at the limit)", fontsize=9)
    labels = [f"{str(r['instance']).removesuffix('.json')} ({r['memory_limit']})" for r in ties]
    grouped_bars(ax2, labels, [("tied blocks: loss", [100 * float(r["loss"]) if r["loss"] is not None else None for r in ties],
                               [True] * len(ties))], log=False)  # fmt: skip
    ax2.set_ylabel("loss against the proven optimum (%)")
    ax2.set_title("--tie-blocks on PaSE instances (no bar: no loss)", fontsize=9)
    fig.tight_layout()
    return fig


def write(free: list[dict], mem: list[dict], ties: list[dict], args: argparse.Namespace) -> None:
    out = REPO / "results"
    if not args.plot_only:
        with open(out / "strategy_generated.csv", "w", newline="") as fh:
            writer = csv.writer(fh)
            for table, rows in (("generated", free), ("memory", mem), ("ties", ties)):
                writer.writerow([f"# {table}"])
                if rows:
                    writer.writerow(list(rows[0]))
                    writer.writerows([list(r.values()) for r in rows])
    png = save(chart(mem, ties), out / "strategy_generated.png")
    lines = [
        "# Strategy problems from layer shapes, liveness memory, tied blocks",
        "",
        "Generated by `benchmarks/strategy_generated_bench.py` (do not edit by hand). "
        f"Machine: {platform.machine()}, Python {platform.python_version()}, {args.threads} threads, time limit {args.time_limit:g} s per solve.",
        "",
        *(["Re-rendered from `strategy_generated.csv` by `--plot-only` (nothing ran).", ""] if args.plot_only else []),
        f"![{png}]({png})",
        "",
        "## GPT-style stacks generated from layer shapes (H100 datasheet profile)",
        "",
        "Configurations enumerated by `milp_partition/strategy_layers.py` (power-of-two splits of each layer's domain, product "
        "at most p) and costed in seconds per training step by the profile's roofline, ring all-reduce and alpha-beta "
        "re-distribution; batch 8 x 1024 tokens (4 blocks) or 4 x 2048 (12 and 24 blocks), vocabulary 50304. "
        "CP-SAT runs cold: no DP, no hint, on the reduced model.",
        "",
        "| instance | layers | configurations | edges | DP value (s/step) | DP (s) | CP-SAT | CP-SAT value | CP-SAT (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in free:
        lines.append(
            f"| {r['instance']} | {r['layers']} | {r['configs']} | {r['edges']} | {_f(r['dp_value_s'])} | {r['dp_s']} | "
            f"{r['cpsat_status']} | {_f(r['cpsat_value_s'])} | {r['cpsat_s']} |"
        )
    lines += [
        "",
        "## The same stacks under a binding memory limit, static and liveness models",
        "",
        "The limit lies halfway, in the model's own measure, between the peak of the choice that takes every layer's "
        "smallest configuration and the peak of the unconstrained optimum. "
        "Static: the sum over layers of parameters, optimizer state and kept activations; liveness: an activation counts "
        "only from its layer's step to its last consumer's (inference, or training with recomputation), one constraint "
        "per step. Default solve chain (under the static model: Lagrangian bound, min-marginal fixing and the Pareto DP, "
        "a back-end only if those do not finish); under liveness the chain goes straight to the back-end, CP-SAT and CBC "
        "both shown.",
        "",
        "| instance | model | solver | limit (bytes) | unconstrained (s) | status | objective (s) | bound (s) | gap | time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in mem:
        lines.append(
            f"| {r['instance']} | {r['memory_model']} | {r['solver']} | {r['limit_bytes']} | {_f(r['unconstrained_s'])} | {r['status']} | "
            f"{_f(r['objective_s'])} | {_f(r['bound_s'])} | {_f(r['gap'], 3)} | {r['seconds']} |"
        )
    lines += [
        "",
        "## Tied blocks against the exact answer (PaSE instances)",
        "",
        "`--tie-blocks` gives layers with identical tables within two edges (colour refinement) one configuration and solves "
        "the smaller quotient problem; no reductions first, so that the repeated blocks stay visible. The loss is relative to "
        "the proven optimum, of what is reported; the binding limit is the one of `results/strategy.md`.",
        "",
        "*tied problem*: the quotient's own answer (the best tied solution when optimal); *reported*: what `--tie-blocks` "
        "returns, the better of that and the untied incumbents (DP, Lagrangian), verified on the original problem.",
        "",
        "| instance | memory limit | exact | exact objective | exact (s) | layers tied (groups) | tied problem | tied problem objective | reported | tied (s) | loss |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in ties:
        lines.append(
            f"| {r['instance']} | {r['memory_limit']} | {r['exact_status']} | {_f(r['exact_objective'], 13)} | {r['exact_s']} | "
            f"{r['tied_layers']} ({r['tied_groups']}) | {r['tied_problem_layers']} layers, {r['tied_problem_status']} | "
            f"{_f(r['tied_problem_objective'], 13)} | {_f(r['tied_objective'], 13)} | {r['tied_s']} | {_f(r['loss'], 3)} |"
        )
    (out / "strategy_generated.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--plot-only", action="store_true", help="re-render the report and the chart from the CSV; solve nothing")
    args = ap.parse_args()
    if args.plot_only:
        tables = read_tables(REPO / "results" / "strategy_generated.csv")
        write(tables["generated"], tables["memory"], tables["ties"], args)
        return
    free, mem = run_generated(args)
    ties = run_ties(args)
    write(free, mem, ties, args)


if __name__ == "__main__":
    main()
