"""Issue 40, "never over 60 s": the hetero heuristics and the search's triple listing stop once their budget is spent,
on settings far larger than the benchmark's (a 20,000-device setting ran 45 s past a 5 s limit before: the even split's
D loop and the listing's all-reduce tables per D read no clock).  Fake clocks only: no wall-clock time is asserted."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from milp_partition.heuristics.hetero_even import best_even_plan, best_uniform_plan

from milp_partition.budget import Budget
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.search import _Search, search
from milp_partition.io.sailor import read_sailor

HETERO = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hetero"
pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")


class _Clock:
    """Reads 0 s for the first ``calls`` readings, then 100 s (past any limit here); counts the readings after."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return 0.0 if self.reads <= self.calls else 100.0

    @property
    def late_reads(self) -> int:
        return max(0, self.reads - self.calls)


def _big(tmp_path: Path, devices: int) -> Path:
    f = tmp_path / "big.json"
    f.write_text(json.dumps({"model": "OPT-350", "global_batch": 1024, "gpus": {"A100-40_us-central1-a": devices}}))
    return f


@pytest.mark.parametrize("calls", [1, 5, 40])
def test_heuristics_stop_at_the_first_reading_past_the_limit(calls: int) -> None:
    """Each heuristic returns at the first reading of a spent clock (one reading past it, no more), with a plan (the
    first one priced at least, so that a limit of 0 s still has one) at the value it reports."""
    problem = read_sailor(HETERO, setting="opt350-a32-v96")
    for heuristic in (best_uniform_plan, best_even_plan):
        assert heuristic(problem)[0] is not None
        clock = _Clock(calls)
        plan, value = heuristic(problem, budget=Budget.starting_now(1.0, clock))
        assert clock.late_reads == 1, heuristic.__name__
        assert plan is not None and evaluate(problem, plan).iteration_s == value


def test_the_listing_stops_building_allreduce_tables_once_the_budget_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On 4,096 devices the listing asks T_sync's split program once per data-parallel degree: past the limit it asks
    it for one more degree at most in all (not thousands), and stops with a positive bound at most the uniform plan's
    seconds (the triples not listed count at sum_l min C + min U of their micro-batch size)."""
    problem = read_sailor(HETERO, setting_file=_big(tmp_path, 4096))
    asked: list[bool] = []
    clock = _Clock(10)
    original = _Search.ar_splits

    def counted(self: _Search, tb: object, d: int) -> object:
        asked.append(clock.reads > clock.calls)
        return original(self, tb, d)  # type: ignore[arg-type]

    monkeypatch.setattr(_Search, "ar_splits", counted)
    got = search(problem, Budget.starting_now(1.0, clock))
    assert got.stopped_by == "time_limit" and not got.complete
    assert sum(asked) <= 1, f"{sum(asked)} all-reduce tables built after the limit"
    plan, value = best_uniform_plan(problem)
    assert plan is not None and got.bound <= value
    assert math.isfinite(got.bound) and got.bound > 0
