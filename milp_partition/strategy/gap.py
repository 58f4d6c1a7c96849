"""The strategy problem in ``gap`` sweeps: PaSE DP, chain DP, Lagrangian choice and data-parallel everywhere.

Every heuristic's choice is scored by :func:`verify_strategy` (its total cost, with
the memory limit checked); the exact row carries :func:`solve_strategy`'s verified
value, proven bound and status.  Grid axes: ``devices`` (a strategy-tables file
runs only at its own p; a strategy-layers file is generated for each p), ``memory``
(a per-device limit; memory per configuration is derived from the layer shapes when
the file has none) and ``memory_model`` (static, liveness).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from milp_partition.calibration.profile import resolve_profile
from milp_partition.errors import InputError, MilpPartitionError
from milp_partition.heuristics.strategy_lagrangian import lagrangian_memory_bound
from milp_partition.io.json_text import parse_json, read_text_file
from milp_partition.io.strategy_tables import looks_like_strategy_tables, strategy_from_dict
from milp_partition.strategy.dp import chain_dp, pase_dp
from milp_partition.strategy.layers import (
    StrategyGenerationSettings,
    generate_strategy_problem,
    layer_graph_from_dict,
    looks_like_layer_graph,
)
from milp_partition.strategy.memory import MemoryModelSettings, with_memory
from milp_partition.strategy.problem import StrategyProblem, StrategySolution
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy
from milp_partition.sweep.jobs import EXACT, GapJob, exact_row, heuristic_row
from milp_partition.units import parse_bytes
from milp_partition.verifiers.strategy import verify_strategy

OBJECTIVE = "cost"
AXES: Mapping[str, tuple[str, ...] | None] = {"devices": None, "memory": None, "memory_model": ("static", "liveness")}


def _extents(name: str) -> list[int] | None:
    """The iteration domain of a PaSE layer name, ``Conv(dom=128x3x55x55)`` -> ``[128, 3, 55, 55]``."""
    m = re.search(r"dom=([0-9x]+)", name)
    return [int(x) for x in m.group(1).split("x")] if m else None


def data_parallel(problem: StrategyProblem) -> StrategySolution:
    """Every layer split p ways along its batch dimension only (Krizhevsky-style data parallelism everywhere).

    The batch dimension of a layer is the first of its domain (``dom=...`` in its name) whose
    extent is the batch size, taken as the most common first extent over the layers (PaSE's
    graphs: 128; an LSTM's domain starts with layers and steps); without a domain, the
    first dimension.  Raises :class:`MilpPartitionError` naming a layer without such a
    configuration.
    """
    domains = {n.id: _extents(n.name) for n in problem.nodes}
    firsts = Counter(d[0] for d in domains.values() if d)
    batch = firsts.most_common(1)[0][0] if firsts else None
    choice: dict[str, str] = {}
    for node in problem.nodes:
        dom = domains[node.id]
        axis = dom.index(batch) if dom and batch in dom else 0
        pick = None
        for c in node.configs:
            parts = c.split("x")
            if (
                len(parts) > axis
                and parts[axis] == str(problem.devices)
                and all(x == "1" for i, x in enumerate(parts) if i != axis)
            ):
                pick = c
                break
        if pick is None:
            raise MilpPartitionError(
                f"layer {node.id!r} has no data-parallel configuration (p = {problem.devices} on dimension {axis})"
            )
        choice[node.id] = pick
    return StrategySolution(choice)


def _lagrangian(problem: StrategyProblem) -> tuple[StrategySolution | None, str]:
    out = lagrangian_memory_bound(problem)
    return out.solution, out.message


def _dp(fn: Callable[[StrategyProblem], object]) -> Callable[[StrategyProblem], tuple[StrategySolution | None, str]]:
    def run(problem: StrategyProblem) -> tuple[StrategySolution | None, str]:
        out = fn(problem)
        return out.solution, out.message  # type: ignore[attr-defined]

    return run


#: Heuristic name -> ``problem -> (choice or None, message)``.
HEURISTIC_FUNCTIONS: Mapping[str, Callable[[StrategyProblem], tuple[StrategySolution | None, str]]] = {
    "pase-dp": _dp(pase_dp),
    "chain-dp": _dp(chain_dp),
    "lagrangian": _lagrangian,
    "data-parallel": lambda problem: (data_parallel(problem), ""),
}
HEURISTICS: tuple[str, ...] = tuple(HEURISTIC_FUNCTIONS)


def _data(path: str | Path) -> object:
    return parse_json(read_text_file(path), str(path))


def recognize(path: Path) -> str | None:
    """``None`` for a strategy-tables or strategy-layers file, else why not."""
    try:
        data = _data(path)
    except InputError as exc:
        return str(exc)
    return None if looks_like_strategy_tables(data) or looks_like_layer_graph(data) else "not a strategy-tables/layers file"


def applicable(path: Path, point: tuple[tuple[str, str], ...]) -> bool:
    """A tables file runs only at its own p (or with no devices axis); a layers file needs a devices value."""
    data = _data(path)
    p = dict(point)
    if looks_like_layer_graph(data):
        return "devices" in p
    return "devices" not in p or (isinstance(data, Mapping) and str(data.get("devices")) == p["devices"])


def load(path: str | Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> StrategyProblem:
    """The tables (generated for the point's p from a layers file), with the point's memory limit and model."""

    data = _data(path)
    p = dict(point)
    if looks_like_layer_graph(data):
        graph = layer_graph_from_dict(data, str(path))
        problem = generate_strategy_problem(
            graph, resolve_profile(options.get("profile", "H100")), StrategyGenerationSettings(devices=int(p["devices"])),
            source=str(path),
        )  # fmt: skip
    else:
        problem = strategy_from_dict(data, str(path), default_name=Path(path).stem)
    if "memory" in p:
        limit = parse_bytes(p["memory"], "--memory")
        if any(n.memory_bytes is None for n in problem.nodes):
            problem = with_memory(problem, MemoryModelSettings(), memory_limit_bytes=limit)
        else:
            problem = problem.with_memory_limit(limit)
    if p.get("memory_model") == "liveness":
        if any(n.memory_bytes is not None and n.activation_bytes is None for n in problem.nodes):
            raise InputError(
                "memory model liveness needs activation_bytes per configuration; this file has none", source=str(path)
            )
        problem = replace(problem, memory_model="liveness")
    return problem


def check(path: Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> None:
    load(path, point, options)


def run(job: GapJob) -> dict[str, str]:
    """One heuristic or the exact solve on one instance at one point: a CSV row."""
    problem = load(job.path, job.point, dict(job.options))
    base = {"size": str(len(problem.nodes)), "unit": problem.cost_unit}
    if job.method == EXACT:
        result = solve_strategy(problem, StrategySolveSettings(time_limit_s=job.time_limit_s, threads=job.threads, seed=job.seed))
        return exact_row(job, result, base)
    heuristic = HEURISTIC_FUNCTIONS.get(job.method)
    if heuristic is None:
        raise InputError(f"unknown strategy heuristic {job.method!r}; known: {', '.join(HEURISTICS)}")

    def verify(solution: object) -> tuple[bool, float, list[str]]:
        report = verify_strategy(problem, solution)  # type: ignore[arg-type]
        return report.feasible, report.objective, report.violations

    return heuristic_row(job, base, lambda: heuristic(problem), verify)
