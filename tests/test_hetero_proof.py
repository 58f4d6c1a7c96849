"""The proof rules of the settings with several zones of one kind: the solve stops once the pooled relaxations prove
the plan within ``pool_stop_gap`` (:class:`milp_partition.hetero.solve.HeteroSolveSettings`), and every bound it reports
stays below the brute-force optimum (every plan of tiny settings enumerated)."""

from __future__ import annotations

import pytest

from milp_partition.chain import Status
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.solve import HeteroSolveSettings, solve_hetero
from tests.test_hetero import HETERO, _plans
from tests.test_hetero_pool import ZONED, _zoned

pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")


def test_settings_reject_a_gap_outside_0_1() -> None:
    for bad in (-0.01, 1.0, float("nan")):
        with pytest.raises(ValueError, match="pool_stop_gap"):
            HeteroSolveSettings(pool_stop_gap=bad)


@pytest.mark.parametrize("objective", ["sailor", "sound"])
def test_the_stop_gap_answers_within_the_gap_and_below_the_optimum(objective: str) -> None:
    """With no exact search after the pooled relaxations (``pool_stop_search_s=0``), every tiny setting's answer is
    proven optimal or within the stop gap of a bound that is at most the brute-force optimum (a bound above it would be
    a false proof), its plan at least that optimum; and the rule fires (some answer stops with a gap), so the test
    checks what it says."""
    stopped = 0
    for counts in ZONED:
        problem = _zoned(counts, objective=objective)
        want = min(evaluate(problem, p).iteration_s for p in _plans(problem))
        res = solve_hetero(problem, HeteroSolveSettings(time_limit_s=60.0, pool_stop_search_s=0.0))
        assert res.status in (Status.OPTIMAL.value, Status.FEASIBLE.value)
        assert res.bound is not None and res.bound <= want * (1 + 1e-9)
        assert res.objective >= want * (1 - 1e-12)
        assert res.gap is not None and res.gap <= 0.01
        if res.status == Status.FEASIBLE.value:
            assert "stopped" in res.solver_notes
            stopped += 1
    assert stopped > 0


def test_the_default_still_proves_small_settings_optimal() -> None:
    """The exact search's short try after the stop gap (``pool_stop_search_s``) proves a tiny setting's optimum."""
    problem = _zoned(ZONED[0])
    want = min(evaluate(problem, p).iteration_s for p in _plans(problem))
    res = solve_hetero(problem, HeteroSolveSettings(time_limit_s=60.0, pool_stop_search_s=30.0))
    assert res.status == Status.OPTIMAL.value
    assert res.objective == pytest.approx(want, rel=1e-12)
