"""The bound of the plans that use both regions (:mod:`milp_partition.hetero.regions`), against brute force: every
plan of tiny settings with one kind in two regions enumerated; the bound must be at most every plan that uses both
regions (a bound above one of them would be a false proof) and, to be worth anything, above some plan that stays in
one region (so the test would catch a rule that bounds all plans by the spanning ones' value)."""

from __future__ import annotations

import math

import pytest

from milp_partition.budget import Budget
from milp_partition.hetero import regions
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.pool import region_of
from milp_partition.hetero.problem import HeteroPlan
from milp_partition.hetero.regions import applies, spanning_bound
from tests.test_hetero import HETERO, _plans
from tests.test_hetero_pool import ZONED, _zoned

pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")

#: One kind in two regions (us-central1 and us-west1), 3 or 4 devices: every plan is enumerated.
SPANNING = [
    {"A100-40_us-central1-a": 2, "A100-40_us-west1-b": 2},
    {"A100-40_us-central1-a": 1, "A100-40_us-central1-b": 1, "A100-40_us-west1-b": 2},
    {"A100-40_us-central1-c": 2, "A100-40_us-west1-b": 1},
    {"V100-16_us-central1-f": 2, "V100-16_us-west1-b": 2},
]


def _spans(plan: HeteroPlan) -> bool:
    return len({region_of(r.zone) for row in plan.replicas for r in row}) >= 2


def _values(counts: dict[str, int], objective: str, blocks: int, batch: int) -> tuple[object, list[float], list[float]]:
    problem = _zoned(counts, blocks=blocks, global_batch=batch, objective=objective)
    both, one = [], []
    for plan in _plans(problem):
        (both if _spans(plan) else one).append(evaluate(problem, plan).iteration_s)
    return problem, both, one


@pytest.mark.parametrize("objective", ["sailor", "sound"])
@pytest.mark.parametrize("counts", SPANNING)
def test_bound_is_at_most_every_plan_using_both_regions(counts: dict[str, int], objective: str) -> None:
    """No cap: the bound itself is at most the least plan in both regions (brute force, 5 layers: P up to 4, where the
    first and last sends are doubled)."""
    problem, both, _one = _values(counts, objective, 3, 512)
    got = spanning_bound(problem, Budget.starting_now(60.0))
    assert got is not None and got.bound_s is not None
    assert both, "the setting has plans in both regions"
    assert got.bound_s <= min(both) * (1 + 1e-12)
    assert got.triples > 0


@pytest.mark.parametrize("counts", SPANNING)
def test_bound_with_a_cap_is_the_least_of_the_cap_and_the_spanning_plans(counts: dict[str, int]) -> None:
    """With the cap at a plan's value (as the solve passes the regions' bound), the answer is at most the cap and at
    most every plan in both regions; small global batches (few micro-batches) too."""
    for batch in (8, 64):
        problem, both, one = _values(counts, "sailor", 1, batch)
        cap = min(one)
        got = spanning_bound(problem, Budget.starting_now(60.0), cap)
        assert got is not None and got.bound_s is not None
        assert got.bound_s <= cap
        assert got.bound_s <= min(both) * (1 + 1e-12)


def test_the_bound_excludes_single_region_plans_somewhere() -> None:
    """On some tiny setting the bound is above the best plan that stays in one region: it bounds only the plans in both
    regions (the test above would fail for a rule that did not require both), and here it proves them worse."""
    above = 0
    for counts in SPANNING:
        for blocks, batch in ((1, 8), (3, 64)):
            problem, both, one = _values(counts, "sailor", blocks, batch)
            got = spanning_bound(problem, Budget.starting_now(60.0))
            assert got is not None and got.bound_s is not None
            assert got.bound_s <= min(both) * (1 + 1e-12)
            above += got.bound_s > min(one) * (1 + 1e-9)
    assert above > 0


def test_the_brute_force_check_catches_an_unsound_compute_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check has teeth: a bound that priced every stage's compute at tp 1 (not at the stage's least tp, whose
    replica may be faster) is above some plan in both regions: a false proof the checks above would report."""
    real = regions._Bounds.comp

    def at_tp1(self: regions._Bounds, mbs: int, t: int, in_flight: int) -> object:
        return real(self, mbs, 1 if 1 in self.tps[mbs] else t, in_flight)

    monkeypatch.setattr(regions._Bounds, "comp", at_tp1)
    false_proofs = 0
    for counts in SPANNING:
        for blocks, batch in ((1, 8), (3, 64), (3, 512)):
            problem, both, _one = _values(counts, "sailor", blocks, batch)
            got = spanning_bound(problem, Budget.starting_now(60.0))
            assert got is not None and got.bound_s is not None
            false_proofs += got.bound_s > min(both) * (1 + 1e-9)
    assert false_proofs > 0


def test_applies_only_to_one_kind_in_two_regions() -> None:
    assert applies(_zoned(SPANNING[0]))
    assert not applies(_zoned(ZONED[0]))  # one region
    assert not applies(_zoned({"A100-40_us-west1-b": 2, "A100-40_us-central1-a": 1, "V100-16_us-central1-f": 1}))
    assert spanning_bound(_zoned(ZONED[0]), Budget.starting_now(10.0)) is None


def test_a_spent_budget_gives_no_bound() -> None:
    got = spanning_bound(_zoned(SPANNING[0]), Budget.starting_now(0.0))
    assert got is not None and got.bound_s is None
    assert not math.isnan(got.triples)


@pytest.mark.parametrize("counts", SPANNING)
def test_labelled_programs_bound_each_term_of_every_plan_in_both_regions(counts: dict[str, int]) -> None:
    """Term by term against brute force, per (mbs, D, P): the labelled all-reduce floor is at most T_sync of every plan
    in both regions, the labelled max and sum of y (no threshold) at most the plan's, and the one-budget program at
    most the three-budget one."""
    problem = _zoned(counts, blocks=3, global_batch=512)
    tb = regions._Bounds(problem)
    got: dict[tuple[int, int, int], tuple[float, float, float, float, float]] = {}
    checked = 0
    for plan in _plans(problem):
        if not _spans(plan):
            continue
        terms = evaluate(problem, plan)
        key = (plan.mbs, plan.dp, len(plan.stages))
        if key not in got:
            mbs, d, p = key
            full, one = tb.labelled(mbs, d, p, math.inf), tb.labelled(mbs, d, p, math.inf, full=False)
            assert one[0] <= full[0] * (1 + 1e-12) and one[1] <= full[1] * (1 + 1e-12)
            got[key] = (tb.labelled_ar(d, p), *full, *one)
        ar, ymax, ysum, _ymax1, _ysum1 = got[key]
        ys = [c + x for c, x in zip(terms.compute_s, terms.sends_s)]
        assert ar <= terms.t_sync_s * (1 + 1e-9) + 1e-12
        assert ymax <= max(ys) * (1 + 1e-9) and ysum <= sum(ys) * (1 + 1e-9)
        checked += 1
    assert checked > 0
