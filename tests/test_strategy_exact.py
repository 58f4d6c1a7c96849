"""The exact strategy models: brute force on tiny instances (with and without memory), PaSE's optima, the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_strategy_dp import BENCHMARKS, STRATEGY, brute_force, random_problem

from milp_partition.backends.registry import installed
from milp_partition.cli.dispatch import main
from milp_partition.io.strategy_tables import read_strategy_tables
from milp_partition.strategy.problem import StrategySolution
from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy
from milp_partition.verifiers.strategy import verify_strategy

#: HiGHS (the ``highs`` extra) replays the CBC cases where it is installed.
needs_highs = pytest.mark.skipif(not installed("highs"), reason="highspy is not installed (pip install 'milp-partition[highs]')")

OPTIMA = {row["file"]: row for row in json.loads((STRATEGY / "optima.json").read_text())}


def _check(problem, solver: str, **kw) -> None:
    expected, _ = brute_force(problem)
    result = solve_strategy(problem, StrategySolveSettings(solver=solver, threads=1, time_limit_s=30, **kw))
    if math.isinf(expected):
        assert result.status == "infeasible", result.message
        return
    assert result.status == "optimal", result.message
    assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-9)
    report = verify_strategy(problem, StrategySolution(result.assignment))
    assert report.feasible and report.objective == pytest.approx(result.objective, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("memory", [False, True])
def test_cpsat_matches_brute_force(seed: int, memory: bool) -> None:
    _check(random_problem(seed, memory=memory, small_ints=seed % 2 == 0), "cpsat")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("memory", [False, True])
def test_cbc_matches_brute_force(seed: int, memory: bool) -> None:
    _check(random_problem(100 + seed, memory=memory, small_ints=seed % 2 == 0), "cbc")


@needs_highs
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("memory", [False, True])
def test_highs_matches_brute_force(seed: int, memory: bool) -> None:
    _check(random_problem(100 + seed, memory=memory, small_ints=seed % 2 == 0), "highs")


@pytest.mark.parametrize("seed", range(6))
def test_without_reductions_or_heuristics(seed: int) -> None:
    _check(random_problem(200 + seed, memory=seed % 2 == 1), "cpsat", reduce=False, heuristics=False)


@pytest.mark.parametrize("seed", range(4))
def test_dp_bound_and_cutoff_keep_the_optimum(seed: int) -> None:
    _check(random_problem(300 + seed, memory=seed % 2 == 1), "cpsat", dp_bound=True, cutoff=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHMARKS)
def test_pase_optima_proven_by_cpsat(name: str) -> None:
    problem = read_strategy_tables(STRATEGY / name)
    result = solve_strategy(problem, StrategySolveSettings(solver="cpsat", threads=2, time_limit_s=60))
    optimum = OPTIMA[name]["optimum"]
    assert result.status == "optimal", result.message
    assert abs(result.objective - optimum) <= 1e-9 * optimum
    assert result.bound <= result.objective and result.gap <= 1e-9
    dp = {h.name: h for h in result.heuristics}["pase_dp"]
    assert dp.exact and abs(dp.objective - optimum) <= 1e-9 * optimum


@pytest.mark.slow
@pytest.mark.parametrize("name", ["alexnet_p8.json", "transformer_p4.json"])
def test_pase_optima_by_cbc(name: str) -> None:
    problem = read_strategy_tables(STRATEGY / name)
    result = solve_strategy(problem, StrategySolveSettings(solver="cbc", threads=2, time_limit_s=120))
    assert result.status == "optimal", result.message
    assert abs(result.objective - OPTIMA[name]["optimum"]) <= 1e-9 * OPTIMA[name]["optimum"]


def test_memory_limit_binds_on_a_real_instance(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """alexnet_p8 with memory from layer shapes: a limit below what PaSE's optimum needs changes the answer."""
    free = solve_strategy(read_strategy_tables(STRATEGY / "alexnet_p8.json"))
    out = tmp_path / "r.json"
    code = main(["solve", str(STRATEGY / "alexnet_p8.json"), "--memory-limit", "400MiB", "--progress", "0", "-o", str(out)])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["status"] == "optimal"
    assert data["memory_bytes"]["per_device"] <= 400 * 2**20
    assert data["objective"] >= free.objective
    # a limit below the least memory any choice needs is proven infeasible
    assert main(["solve", str(STRATEGY / "alexnet_p8.json"), "--memory-limit", "1MiB", "-q"]) == 3
    assert capsys.readouterr().out.splitlines()[-1].startswith("infeasible")


def test_cli_detects_strategy_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", str(STRATEGY / "rnnlm_p8.json"), "-q"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("optimal")
    assert float(line.split("objective=")[1].split()[0]) == pytest.approx(OPTIMA["rnnlm_p8.json"]["optimum"], rel=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_lagrangian_bound_is_a_lower_bound(seed: int) -> None:
    from milp_partition.heuristics.strategy_lagrangian import lagrangian_memory_bound

    problem = random_problem(400 + seed, memory=True, small_ints=seed % 2 == 0)
    expected, _ = brute_force(problem)
    lag = lagrangian_memory_bound(problem)
    assert lag.bound <= expected * (1 + 1e-12) + 1e-12
    if math.isinf(expected):
        assert lag.solution is None
    if lag.solution is not None:
        report = verify_strategy(problem, lag.solution)
        assert report.feasible and report.objective == pytest.approx(lag.value, rel=1e-12, abs=1e-12)
        assert lag.value >= expected - 1e-9


def test_lagrangian_bound_matches_the_lp_bound_on_a_real_instance() -> None:
    """alexnet_p8 under a binding limit: the bound is below the proven optimum and above the unconstrained one."""
    from milp_partition.heuristics.strategy_lagrangian import lagrangian_memory_bound

    from milp_partition.strategy.memory import with_memory

    problem = with_memory(read_strategy_tables(STRATEGY / "alexnet_p8.json"), memory_limit_bytes=400 * 2**20)
    exact = solve_strategy(problem, StrategySolveSettings(heuristics=False))
    assert exact.status == "optimal"
    lag = lagrangian_memory_bound(problem)
    free = OPTIMA["alexnet_p8.json"]["optimum"]
    assert free * (1 - 1e-12) <= lag.bound <= exact.objective * (1 + 1e-12)
