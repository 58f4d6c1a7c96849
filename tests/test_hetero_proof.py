"""The proof rules of the settings with several zones of one kind: the solve stops once the pooled relaxations prove
the plan within ``pool_stop_gap`` (:class:`milp_partition.hetero.solve.HeteroSolveSettings`), and every bound it reports
stays below the brute-force optimum (every plan of tiny settings enumerated)."""

from __future__ import annotations

import pytest

from milp_partition.budget import Budget
from milp_partition.chain import Status
from milp_partition.hetero import solve as solve_module
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.pool import region_subsettings
from milp_partition.hetero.pooled import regional_plan
from milp_partition.hetero.problem import plan_to_sailor
from milp_partition.hetero.solve import HeteroSolveSettings, solve_hetero
from milp_partition.verifiers.hetero import verify_hetero
from tests.test_hetero import HETERO, _plans
from tests.test_hetero_pool import ZONED, _zoned

pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")


def test_settings_reject_a_gap_outside_0_1() -> None:
    for bad in (-0.01, 1.0, float("nan")):
        with pytest.raises(ValueError, match="pool_stop_gap"):
            HeteroSolveSettings(pool_stop_gap=bad)
    for bad_s in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="pool_stop_search_s"):
            HeteroSolveSettings(pool_stop_search_s=bad_s)


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


TWO_REGIONS = [
    {"A100-40_us-central1-a": 2, "A100-40_us-west1-b": 2},
    {"A100-40_us-central1-a": 1, "A100-40_us-central1-b": 1, "A100-40_us-west1-b": 2},
    {"A100-40_us-west1-b": 2, "A100-40_us-central1-a": 1, "V100-16_us-central1-f": 1},
    {"A100-40_us-central1-a": 1, "A100-40_us-central1-c": 1, "V100-16_us-west1-b": 1},
]


@pytest.mark.parametrize("counts", TWO_REGIONS)
def test_regional_plans_are_plans_of_the_setting_and_their_pools_bound_the_region(counts: dict[str, int]) -> None:
    """Each region alone (:func:`region_subsettings`): its columns are the setting's in that region; its pooled optimum
    is at most every enumerated plan that stays in the region (and only those: it is no bound of the setting); the best
    regional plan is accepted by the independent verifier at its value, at least the setting's optimum."""
    problem = _zoned(counts)
    plans = list(_plans(problem))
    values = [evaluate(problem, p).iteration_s for p in plans]
    subs = region_subsettings(problem)
    assert len(subs) == 2
    labels = [{c.label for c in s.cluster.columns} for s in subs]
    assert set().union(*labels) == {c.label for c in problem.cluster.columns if c.count > 0}
    got = regional_plan(problem, Budget.starting_now(60.0))
    assert len(got.regions) == 2
    for sub, region in zip(subs, got.regions):
        zones = {c.zone for c in sub.cluster.columns}
        inside = [v for p, v in zip(plans, values) if all(r.zone in zones for row in p.replicas for r in row)]
        assert region["complete"]
        if inside:
            assert region["pooled_value_s"] <= min(inside) * (1 + 1e-12)
    assert got.plan is not None
    rep = verify_hetero(problem, plan_to_sailor(got.plan))
    assert rep.feasible, rep.violations
    assert rep.iteration_s == pytest.approx(got.value_s, rel=1e-12)
    assert got.value_s >= min(values) * (1 - 1e-12)


def test_one_region_has_no_subsettings() -> None:
    assert region_subsettings(_zoned(ZONED[0])) == []


def test_no_exact_search_when_the_pooled_steps_leave_little_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake clock jumps to 85 % of the limit while the pooled relaxation runs (as a long pooled search does): the
    exact search over the zones is not started (its notes say so; no nodes), and the answer keeps the pooled bound,
    at most the brute-force optimum, with the stop gap off so that only the time rule decides."""
    problem = _zoned(ZONED[0])  # a gap of 0.4 % after the pooled step
    want = min(evaluate(problem, p).iteration_s for p in _plans(problem))
    now = [0.0]
    budget = Budget.starting_now(100.0, clock=lambda: now[0])
    real = solve_module.pooled_bound

    def slow_pooled_bound(*args: object, **kwargs: object) -> object:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        now[0] = 85.0
        return out

    monkeypatch.setattr(solve_module, "pooled_bound", slow_pooled_bound)
    res = solve_hetero(problem, HeteroSolveSettings(budget=budget, pool_stop_gap=0.0))
    assert res.solver_notes["stopped"].startswith("exact search skipped")
    assert "nodes" not in res.solver_notes
    assert res.bound is not None and res.bound <= want * (1 + 1e-9)
    assert res.objective >= want * (1 - 1e-12)


def test_past_the_device_threshold_the_gap_answer_skips_the_exact_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Within the stop gap, a setting of more than :data:`~milp_partition.hetero.solve.STOP_SEARCH_MAX_DEVICES` devices
    gets no exact search (a note says so): the answer keeps the pooled bound, at most the brute-force optimum, and
    stays within the gap.  Lowering the threshold below a tiny setting's devices shows it (the same answer as
    ``pool_stop_search_s=0``, which skips the search too)."""
    stopped = 0
    for counts in ZONED:
        problem = _zoned(counts)
        want = min(evaluate(problem, p).iteration_s for p in _plans(problem))
        none = solve_hetero(problem, HeteroSolveSettings(time_limit_s=60.0, pool_stop_search_s=0.0))
        with monkeypatch.context() as mp:
            mp.setattr(solve_module, "STOP_SEARCH_MAX_DEVICES", 0)
            res = solve_hetero(problem, HeteroSolveSettings(time_limit_s=60.0))
        assert res.bound is not None and res.bound <= want * (1 + 1e-9)
        assert res.gap is not None and res.gap <= 0.01
        assert (res.status, res.objective, res.bound) == (none.status, none.objective, none.bound)
        if res.status == Status.FEASIBLE.value:
            assert "exact search skipped" in res.solver_notes["stopped"]
            assert "nodes" not in res.solver_notes  # no exact search ran
            stopped += 1
    assert stopped > 0
