"""Benchmark of the joint planner on a cluster of device kinds (issue 40 item 4): benchmarks/mixed_joint_bench.py.

Writes ``results/mixed_joint.md``.  An imported Llama-style model (transformers' default ``llama`` config: 32 blocks,
width 4096, 32 heads, vocabulary 32000, about 6.7 B parameters; imported offline on the meta device with
``milp-partition import hf llama --input 1x2048:int64 --training --granularity layer --dtype float16
--optimizer-state-factor 7``) is planned on two mixed clusters, 8 H100 + 16 A100 and 8 A100 + 16 V100 (datasheet
profiles and memories, 8 devices per node, N = 64 micro-batches of one sequence).  Per cluster:

* ``mixed (proven)``: :func:`milp_partition.joint.mixed_solve.solve_mixed` (the exact DP; the verifier's value);
* ``<kind> alone``: the best homogeneous plan on that kind's devices alone, by the homogeneous planner
  (:func:`milp_partition.joint.solve.solve_joint` on the kind's table), with the mixed DP restricted to the kind beside
  it as a check (the two must agree);
* ``naive (even split by kind)``: one stage per kind, the nodes split in half in layer order, each stage's best
  d and t (d t at most the kind's count) with every layer vanilla, or every layer recomputed where vanilla does not fit;
  both orders of the kinds are tried, the better kept; every plan is scored by the verifier.

Times are wall-clock seconds of the in-process solve on this machine (a shared 2-core machine).  Run from the
repository root::

    python benchmarks/mixed_joint_bench.py [--graph llama.json] [--output results/mixed_joint.md]

Without ``--graph`` the model is imported first (about a minute) into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from milp_partition.cli import main as cli_main
from milp_partition.joint.mixed_layers import mixed_from_imported, one_kind, parse_kinds
from milp_partition.joint.mixed_problem import MixedJointProblem, MixedPlan, MixedStage
from milp_partition.joint.mixed_solve import MixedSolveSettings, solve_mixed
from milp_partition.joint.problem import JointSolveSettings, joint_cluster
from milp_partition.joint.solve import solve_joint
from milp_partition.report import gap_text
from milp_partition.verifiers.joint_mixed import verify_joint_mixed

IMPORT = (
    "import hf llama --input 1x2048:int64 --training --granularity layer --dtype float16 --optimizer-state-factor 7 "
    "--output {path}"
)
CLUSTERS = ("H100:8,A100:16", "A100:8,V100:16")
MICROBATCHES = 64
TIME_LIMIT_S = 600.0


def _span(stages: list[dict[str, Any]], names: dict[str, str]) -> str:
    """``H100 4x1 [blocks 3-5]`` per stage, joined."""
    out = []
    for st in stages:
        nodes = st["nodes"]
        out.append(
            f"{st['kind']} {st['data_parallel']}x{st['tensor_parallel']} ({len(nodes)}: {names[nodes[0]]}..{names[nodes[-1]]})"
        )
    return "; ".join(out)


def naive_plan(problem: MixedJointProblem, order: tuple[str, str]) -> tuple[float, MixedPlan | None]:
    """One stage per kind (``order``), the nodes split in half; each stage's best d, t, all vanilla or all recomputed."""
    ids = [n.id for n in problem.graph.nodes]
    halves = (tuple(ids[: len(ids) // 2]), tuple(ids[len(ids) // 2 :]))
    N = problem.microbatches
    best: tuple[float, MixedPlan | None] = (math.inf, None)
    options: list[list[MixedStage]] = []
    for nodes, name in zip(halves, order, strict=True):
        kind = problem.kind(name)
        table = {n.id: n for n in problem.tables[name].nodes}
        stages = []
        for t in problem.degrees(name):
            for d in range(1, kind.count // t + 1):
                if N % d:
                    continue
                for pick in ("vanilla", "activation recomp"):
                    configs = {v: pick if any(c.id == pick for c in table[v].configs[t]) else "vanilla" for v in nodes}
                    stages.append(MixedStage(nodes, name, d, t, configs))
        options.append(stages)
    for first in options[0]:
        for second in options[1]:
            plan = MixedPlan((first, second))
            report = verify_joint_mixed(problem, plan)
            if report.feasible and report.objective < best[0]:
                best = (report.objective, plan)
    return best


def _row(
    cluster: str,
    label: str,
    status: str,
    value: float | None,
    bound: float | None,
    mixed: float | None,
    seconds: float,
    plan: str,
) -> str:
    def f(x: float | None, digits: int = 6) -> str:
        return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"

    ratio = f"{value / mixed:.3f}" if value is not None and mixed else "-"
    step = f(MICROBATCHES * value) if value is not None else "-"
    gap = gap_text((value - bound) / value) if value is not None and bound is not None and value > 0 else "-"
    return f"| {cluster} | {label} | {status} | {f(value)} | {step} | {f(bound)} | {gap} | {ratio} | {seconds:.2f} | {plan} |"


def bench(graph: Path, import_s: float | None) -> list[str]:
    data = json.loads(graph.read_text())
    lines = [
        "# The joint planner on clusters of device kinds (issue 40 item 4)",
        "",
        "Written by `benchmarks/mixed_joint_bench.py` (`python benchmarks/mixed_joint_bench.py`); do not edit by hand.",
        "",
        f"Model: transformers' default `llama` config (32 blocks, width 4096, 32 heads, vocabulary 32000; 6.74 B parameters) "
        f"imported offline with `milp-partition {IMPORT.format(path='llama.json')}`"
        + (f" ({import_s:.1f} s)" if import_s is not None else "")
        + f". N = {MICROBATCHES} micro-batches of one 2048-token sequence; datasheet profiles and memories, 8 devices per node, "
        "each kind's own device-to-device bandwidth. Time per sample is the verifier's (Piper's objective, seconds); "
        "step = N x time per sample (steady state). The CLI equivalent: "
        "`milp-partition solve llama.json --problem joint --kinds H100:8,A100:16`.",
        "",
        "| cluster | plan | status | time/sample (s) | step (s) | bound (s) | gap | vs mixed | solve (s) | stages (kind d x t (nodes: first..last)) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    checks = []
    for spec in CLUSTERS:
        problem = mixed_from_imported(data, str(graph), parse_kinds(spec), microbatches=MICROBATCHES)
        names = {n.id: n.id.replace("model.layers.", "block ") for n in problem.graph.nodes}
        t0 = time.perf_counter()
        mixed = solve_mixed(problem, MixedSolveSettings(time_limit_s=TIME_LIMIT_S))
        seconds = time.perf_counter() - t0
        label = spec.replace(":", " x ").replace(",", " + ")
        lines.append(
            _row(
                label,
                "mixed (proven)",
                mixed.status,
                mixed.objective,
                mixed.bound,
                mixed.objective,
                seconds,
                _span(mixed.stages, names),
            )
        )
        for kind in problem.kinds:
            alone = problem.tables[kind.name]
            alone = replace(
                alone, cluster=joint_cluster(kind.count, kind.memory_bytes, kind.bandwidth_bytes_per_s), microbatches=MICROBATCHES
            )
            t0 = time.perf_counter()
            h = solve_joint(alone, JointSolveSettings(time_limit_s=TIME_LIMIT_S))
            seconds = time.perf_counter() - t0
            stages = [{**s, "kind": kind.name} for s in h.stages]
            lines.append(
                _row(
                    label,
                    f"{kind.name} alone ({kind.count})",
                    h.status,
                    h.objective,
                    h.bound,
                    mixed.objective,
                    seconds,
                    _span(stages, names),
                )
            )
            check = solve_mixed(one_kind(problem, kind.name), MixedSolveSettings(time_limit_s=TIME_LIMIT_S))
            agree = h.objective == check.objective or (
                h.objective is not None
                and check.objective is not None
                and abs(h.objective - check.objective) <= 1e-9 * h.objective
            )
            checks.append(
                f"- {label}, {kind.name} alone: homogeneous planner {h.status} {h.objective!r}, mixed DP on the kind alone "
                f"{check.status} {check.objective!r}: {'agree' if agree else 'DISAGREE'}"
            )
        t0 = time.perf_counter()
        order = tuple(k.name for k in problem.kinds)
        results = [naive_plan(problem, order), naive_plan(problem, order[::-1])]  # type: ignore[arg-type]
        value, plan = min(results, key=lambda r: r[0])
        seconds = time.perf_counter() - t0
        stages = []
        if plan is not None:
            stages = [
                {"nodes": list(s.nodes), "kind": s.kind, "data_parallel": s.data_parallel, "tensor_parallel": s.tensor_parallel}
                for s in plan.stages
            ]
        lines.append(
            _row(
                label,
                "naive (even split by kind)",
                "feasible" if plan else "none fits",
                value if plan else None,
                None,
                mixed.objective,
                seconds,
                _span(stages, names),
            )
        )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines += [
        "",
        f"Load average when the table was done (1, 5, 15 min): {load} on {os.cpu_count()} cores: the seconds vary with it.",
        "",
        "Checks (the one-kind optimum of the mixed DP against the homogeneous planner):",
        "",
        *checks,
        "",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", type=Path, help="an import of the model (default: import it now)")
    parser.add_argument("--output", type=Path, default=Path("results/mixed_joint.md"))
    args = parser.parse_args()
    import_s = None
    with tempfile.TemporaryDirectory() as tmp:
        graph = args.graph
        if graph is None:
            graph = Path(tmp) / "llama.json"
            t0 = time.perf_counter()
            if cli_main(IMPORT.format(path=graph).split()) != 0:
                raise SystemExit("the import failed")
            import_s = time.perf_counter() - t0
        lines = bench(graph, import_s)
    args.output.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
