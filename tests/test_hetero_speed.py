"""Issue 40, the speed work on the hetero search: every new pruning rule against brute force on tiny settings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from milp_partition.budget import Budget
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.search import _Search, _Tables
from tests.test_hetero import _plans, _tiny

HETERO = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hetero"
pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")


def _best_per_triple(problem) -> dict[tuple[int, int, int], float]:  # type: ignore[no-untyped-def]
    best: dict[tuple[int, int, int], float] = {}
    for plan in _plans(problem):
        key = (plan.mbs, len(plan.replicas[0]), len(plan.stages))
        best[key] = min(best.get(key, math.inf), evaluate(problem, plan).iteration_s)
    return best


@pytest.mark.parametrize(("objective", "count", "blocks"), [("sailor", 2, 3), ("sound", 2, 3), ("sailor", 3, 3)])
def test_device_test_before_a_triple_never_rules_out_a_better_plan(objective: str, count: int, blocks: int) -> None:
    """:meth:`_Search.devices_admit` (the weighted device budget under the incumbent's caps, before a triple's tables):
    with the incumbent just above a triple's best plan (every plan enumerated) it admits the triple; with the incumbent
    just above the optimum it rules some triple out (it can fail)."""
    problem = _tiny(objective, count, blocks)
    best = _best_per_triple(problem)
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
    for (mbs, d, p), v in best.items():
        srch.out.value = v * (1 + 1e-9)
        assert srch.devices_admit(tables[mbs], d, p), (mbs, d, p)
    srch.out.value = min(best.values()) * (1 + 1e-9)
    total = problem.cluster.device_count
    ruled_out = [
        (mbs, d, p)
        for mbs in tables
        for d in range(1, total + 1)
        for p in range(1, min(tables[mbs].L, total // d) + 1)
        if not srch.devices_admit(tables[mbs], d, p)
    ]
    assert any(t in best for t in ruled_out)  # a triple with feasible plans, every one above the incumbent


@pytest.mark.parametrize(("objective", "count", "blocks"), [("sailor", 3, 1), ("sound", 3, 1), ("sailor", 3, 3)])
def test_a_data_parallel_degree_left_out_holds_nothing_better_than_one_less(objective: str, count: int, blocks: int) -> None:
    """:meth:`_Search.dominated_by_fewer` (D = d left out when d - 1 has the same micro-batch count and the all-reduce
    table allows it): on every triple it leaves out (it leaves some out here), the best plan (every plan enumerated)
    is no better than the best plan of D = d - 1 with the same micro-batch size and P."""
    problem = _tiny(objective, count, blocks)
    best = _best_per_triple(problem)
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
    left_out = [(mbs, d, p) for (mbs, d, p) in best if srch.dominated_by_fewer(tables[mbs], d)]
    assert left_out
    for mbs, d, p in left_out:
        assert best[(mbs, d - 1, p)] <= best[(mbs, d, p)] * (1 + 1e-12), (mbs, d, p)


def test_the_degree_rule_is_off_where_the_fits_make_a_smaller_ring_slower() -> None:
    """GPT-Neo-2.7's last layer alone is a 5 kB stage: there the fits are used where they are ill-conditioned (or a
    ring of d - 1 members is slower), so the rule leaves no D out even where the micro-batch count repeats."""
    from milp_partition.io.sailor import read_sailor

    problem = read_sailor(HETERO, setting="gptneo-a32-v96")
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tb = _Tables(problem, 8)
    same = [
        d for d in range(2, 40) if math.ceil(problem.global_batch / (8 * d)) == math.ceil(problem.global_batch / (8 * (d - 1)))
    ]
    assert same and not any(srch.dominated_by_fewer(tb, d) for d in same)
