"""Issue 40, the hetero search's Lagrangian bound on the stages' sum of y under the device budget, against brute force.

:meth:`milp_partition.hetero.search._Triple.lagrange` (at a triple's root) and :meth:`~milp_partition.hetero.search.
_Triple.lag_rest` (in the tree, on the devices the decided stages leave) must stay at most the sum of y_i = C_i + X_i
of every plan below the incumbent (every plan enumerated on tiny two-column settings); without the multiplier's price
of the budget the same check fails (it can fail); the search with the bound proves the brute-force optimum with fewer
nodes than without it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from milp_partition.budget import Budget
from milp_partition.hetero import native
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.search import _lagrange_suffix, _Search, _Tables, _Triple, search
from tests.test_hetero import _plans, _tiny

HETERO = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hetero"
pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")


def _reduced_set(tb: _Tables, row: tuple) -> tuple[int, ...]:  # type: ignore[type-arg]
    """The reduced set of a stage's replicas: per column (in column order) the configuration of its least tp."""
    least: dict[int, int] = {}
    for r in row:
        j = next(j for j, c in enumerate(tb.cols) if (c.kind, c.zone) == (r.kind, r.zone))
        least[j] = min(least.get(j, r.tp), r.tp)
    return tuple(tb.cfgs.index((j, least[j])) for j in sorted(least))


@pytest.mark.parametrize(("objective", "count", "blocks"), [("sailor", 2, 3), ("sound", 2, 3), ("sailor", 3, 3)])
def test_lagrangian_sum_bound_holds_for_every_plan_below_the_incumbent(objective: str, count: int, blocks: int) -> None:
    """Per triple (mbs, D, P) and incumbent (just above the triple's best plan, and 30 % above it): the triple's caps do
    not rule it out, the root bound is at most sum_i y_i of every plan of the triple below the incumbent, and at every
    stage i of such a plan the tree's bound B[e_i][q_i] (its reduced set q_i, the decided stages' weighted devices) is
    at most the later stages' sum of y.  The root bound is above the bottleneck program's least sum on some triple (the
    rule does something), and the same check with the budget's price left out (G - 0) fails on some plan."""
    problem = _tiny(objective, count, blocks)
    tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
    by_triple: dict[tuple[int, int, int], list[tuple[object, float, list[float]]]] = {}
    for plan in _plans(problem):
        t = evaluate(problem, plan)
        key = (plan.mbs, len(plan.replicas[0]), len(plan.stages))
        by_triple.setdefault(key, []).append((plan, t.iteration_s, [c + x for c, x in zip(t.compute_s, t.sends_s)]))
    checked = raised = unsound_caught = 0
    for (mbs, d, p), items in by_triple.items():
        best = min(v for _plan, v, _y in items)
        for frac in (1 + 1e-9, 1.3):
            srch = _Search(problem, Budget.starting_now(60.0), best * frac, None)
            tr = _Triple(srch, tables[mbs], d, p)
            assert tr.tighten_caps(), (mbs, d, p)  # a plan below the incumbent exists: the caps must keep the triple
            root = tr.lagrange(tr.masks_by_k, float(tr.rsum_np[0][0]))
            raised += root > float(tr.rsum_np[0][0]) * (1 + 1e-6)
            no_price = float(tr.lag_g[:, 0, 0].max()) if tr.lag_g is not None else -math.inf
            for plan, v, y in items:
                if v >= best * frac:
                    continue
                checked += 1
                assert sum(y) >= root * (1 - 1e-12), (mbs, d, p, plan)
                unsound_caught += sum(y) < no_price * (1 - 1e-9)
                used = [0.0] * len(tr.lam_cap)
                for i in range(p - 1):
                    qi = tr.set_index[_reduced_set(tr.tb, plan.replicas[i])]  # type: ignore[attr-defined]
                    e = plan.stages[i][1]  # type: ignore[attr-defined]
                    b, row = tr.lag_rest(i, used)
                    later = sum(y[i + 1 :])
                    assert later >= b[e][qi] * (1 - 1e-12) - 1e-15, (mbs, d, p, i, plan)
                    assert b[e][qi] >= row[e] or not math.isfinite(row[e])
                    used = [u + w for u, w in zip(used, tr.usage_arr[qi])]
    assert checked > 100 and raised > 0 and unsound_caught > 0


@pytest.mark.parametrize(("objective", "count"), [("sailor", 3), ("sound", 2)])
def test_search_with_and_without_the_lagrangian_bound_matches_brute_force(
    objective: str, count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search with the bound and with it off (no multipliers) proves the optimum of every plan enumerated (value and
    bound); with it, fewer nodes."""
    import milp_partition.hetero.search as hs

    problem = _tiny(objective, count, 3)
    want = min(evaluate(problem, plan).iteration_s for plan in _plans(problem))
    with_it = search(problem, Budget.starting_now(60.0))
    monkeypatch.setattr(hs, "LAGRANGE_BOUND", False)
    without = search(problem, Budget.starting_now(60.0))
    for got in (with_it, without):
        assert got.complete
        assert got.value == pytest.approx(want, rel=1e-12)
        assert got.bound <= want * (1 + 1e-12) and got.bound == pytest.approx(want, rel=1e-9)
    assert with_it.nodes < without.nodes


def test_lagrangian_program_in_c_equals_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`_lagrange_suffix` in C and in numpy on random stage tables with holes (inf) and multipliers: exactly the
    same values."""
    if not native.available():
        pytest.skip("the C extension is not built (setup.py build_ext)")
    rng = np.random.default_rng(17)
    for _ in range(150):
        p, nk, l1, n = (int(rng.integers(1, 6)), int(rng.integers(1, 7)), int(rng.integers(2, 12)), int(rng.integers(1, 9)))
        ylb = rng.random((p, nk, l1, l1))
        ylb[rng.random(ylb.shape) < rng.random()] = math.inf
        wm = rng.random((n, nk)) * rng.choice([1e-3, 1.0, 10.0])
        got = native.lagrange_suffix(ylb, wm)
        with monkeypatch.context() as mp:
            mp.setattr(native, "_ext", None)
            want = _lagrange_suffix(ylb, wm, l1 - 1)
        assert got is not None and np.array_equal(got, want)


@pytest.mark.parametrize(("objective", "count", "blocks"), [("sailor", 2, 3), ("sound", 2, 3), ("sailor", 3, 3)])
def test_device_floor_of_the_largest_y_holds_for_every_plan_below_the_incumbent(objective: str, count: int, blocks: int) -> None:
    """:meth:`_Triple.ymax_floor` (the largest Y at which the two-column device table of the configurations with ylb <=
    Y holds no plan): per triple and incumbent (just above the triple's best plan, and 30 % above), every plan of the
    triple below the incumbent has max_i y_i at least the floor.  The floor is above the device-time floor on some
    triple (it does something), and some plan below the incumbent has max_i y_i below the triple's cap (so a floor
    taken at the bisection's feasible end would be caught)."""
    problem = _tiny(objective, count, blocks)
    tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
    by_triple: dict[tuple[int, int, int], list[tuple[float, float]]] = {}
    for plan in _plans(problem):
        t = evaluate(problem, plan)
        key = (plan.mbs, len(plan.replicas[0]), len(plan.stages))
        by_triple.setdefault(key, []).append((t.iteration_s, max(c + x for c, x in zip(t.compute_s, t.sends_s))))
    raised = below_cap = checked = 0
    for (mbs, d, p), items in by_triple.items():
        best = min(v for v, _y in items)
        for frac in (1 + 1e-9, 1.3):
            srch = _Search(problem, Budget.starting_now(60.0), best * frac, None)
            tr = _Triple(srch, tables[mbs], d, p)
            assert tr.tighten_caps() and tr.lambda_suffix() and tr.two_suffix(), (mbs, d, p)
            if tr.m == 1:
                continue
            floor = tr.ymax_floor()
            raised += floor > tr.floor_y * (1 + 1e-9)
            for v, ymax in items:
                if v < best * frac:
                    checked += 1
                    assert ymax >= floor * (1 - 1e-12), (mbs, d, p, ymax, floor)
                    below_cap += ymax < tr.y_cap_masks * (1 - 1e-9)
    assert checked > 50 and raised > 0 and below_cap > 0


@pytest.mark.parametrize("objective", ["sailor", "sound"])
def test_search_with_the_device_floor_and_its_levels_from_the_first_node_matches_brute_force(
    objective: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The floor of max_i y_i under the devices and the levels between it and the cap used from the first node (with and
    without the Lagrangian bound): the search proves the optimum of every plan enumerated (value and bound), from no
    incumbent and from one just above the optimum, with the C loops and with numpy alone (the same nodes)."""
    import milp_partition.hetero.search as hs

    monkeypatch.setattr(hs, "YSTAR_AFTER_NODES", -1)
    monkeypatch.setattr(hs, "LEVEL_AFTER_NODES", -1)
    floors: list[float] = []
    ymax_floor = hs._Triple.ymax_floor

    def counted(self: hs._Triple) -> float:
        floors.append(ymax_floor(self) - self.floor_y)
        return floors[-1] + self.floor_y

    monkeypatch.setattr(hs._Triple, "ymax_floor", counted)
    ar_floors: list[float] = []
    allreduce_floor = hs._Triple.allreduce_floor

    def counted_ar(self: hs._Triple) -> float:
        ar_floors.append(allreduce_floor(self) - self.ar_floor)
        return ar_floors[-1] + self.ar_floor

    monkeypatch.setattr(hs._Triple, "allreduce_floor", counted_ar)
    problem = _tiny(objective, 3, 3)
    want = min(evaluate(problem, plan).iteration_s for plan in _plans(problem))
    for lagrange in (True, False):
        monkeypatch.setattr(hs, "LAGRANGE_BOUND", lagrange)
        for start in (math.inf, want * 1.05):
            got = search(problem, Budget.starting_now(60.0), start)
            assert got.complete
            assert got.value == pytest.approx(want, rel=1e-12)
            assert got.bound <= want * (1 + 1e-12) and got.bound == pytest.approx(want, rel=1e-9)
            if native.available():
                with monkeypatch.context() as mp:
                    mp.setattr(native, "_ext", None)
                    plain = search(problem, Budget.starting_now(60.0), start)
                assert (plain.value, plain.bound, plain.nodes) == (got.value, got.bound, got.nodes)
    assert any(f > 0 for f in floors)  # the floor was raised in some tree
    assert all(f >= 0 for f in ar_floors)  # (the trees here are of D = 1: no all-reduce; see the next test)


@pytest.mark.parametrize(("objective", "count", "blocks"), [("sailor", 2, 3), ("sailor", 3, 3)])
def test_column_allreduce_bound_and_its_device_floor_hold_for_every_plan(objective: str, count: int, blocks: int) -> None:
    """:meth:`_Search.col_ar_table`: every stage of every plan enumerated (D >= 2) has its all-reduce at least the bound
    of every column it has a replica on, at its least tp; :meth:`_Triple.allreduce_floor` (the largest A at which the
    two-column device table of the configurations that bound allows under A holds no plan): per triple and incumbent,
    every plan below the incumbent has T_sync at least the floor; the floor is above T_sync's program floor on some
    triple, and some plan below the incumbent has T_sync below the all-reduce cap (a floor at the bisection's feasible
    end would be caught)."""
    problem = _tiny(objective, count, blocks)
    tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
    srch0 = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    by_triple: dict[tuple[int, int, int], list[tuple[float, float]]] = {}
    stages = 0
    for plan in _plans(problem):
        t = evaluate(problem, plan)
        d = len(plan.replicas[0])
        key = (plan.mbs, d, len(plan.stages))
        by_triple.setdefault(key, []).append((t.iteration_s, t.t_sync_s))
        if d < 2:
            continue
        tb = tables[plan.mbs]
        col = srch0.col_ar_table(tb, d)
        for (s0, e), row, ar in zip(plan.stages, plan.replicas, t.allreduce_s):
            t0 = min(4, min(r.tp for r in row))
            for r in row:
                j = next(j for j, c in enumerate(tb.cols) if (c.kind, c.zone) == (r.kind, r.zone))
                assert ar >= col[t0][j][s0][e], (plan, j)
            stages += 1
    raised = below_cap = checked = 0
    for (mbs, d, p), items in by_triple.items():
        if d < 2:
            continue
        best = min(v for v, _a in items)
        for frac in (1 + 1e-9, 1.3):
            srch = _Search(problem, Budget.starting_now(60.0), best * frac, None)
            tr = _Triple(srch, tables[mbs], d, p)
            assert tr.tighten_caps() and tr.lambda_suffix() and tr.two_suffix(), (mbs, d, p)
            floor = tr.allreduce_floor()
            raised += floor > tr.ar_floor * (1 + 1e-9)
            for v, sync in items:
                if v < best * frac:
                    checked += 1
                    assert sync >= floor * (1 - 1e-12), (mbs, d, p, sync, floor)
                    below_cap += sync < tr.ar_cap_masks * (1 - 1e-9)
    assert stages > 100 and checked > 50 and raised > 0 and below_cap > 0


@pytest.mark.parametrize(("objective", "count", "blocks"), [("sailor", 2, 3), ("sound", 2, 3), ("sailor", 3, 3)])
def test_two_column_precheck_keeps_every_triple_with_a_plan_below_the_incumbent(
    objective: str, count: int, blocks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two-column device table under the incumbent's caps alone, before the caps' rounds (:meth:`_Triple.run`):
    per triple and incumbent (just above the triple's best plan, and 30 % above) it keeps the triple; with the
    incumbent below the best plan (just below, 10 % and 30 % below) it rules out some triples, and each of them the
    caps' rounds and
    :meth:`_Triple.two_suffix` rule out as well (the same decisions).  A variant that halves the cap on y is caught
    (it rules out a triple holding a plan below the incumbent).  The search proves the brute-force optimum with the
    check and without it, with the same nodes."""
    import milp_partition.hetero.search as hs

    problem = _tiny(objective, count, blocks)
    tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
    best_of: dict[tuple[int, int, int], float] = {}
    for plan in _plans(problem):
        key = (plan.mbs, len(plan.replicas[0]), len(plan.stages))
        best_of[key] = min(best_of.get(key, math.inf), evaluate(problem, plan).iteration_s)
    ruled_out = broken_caught = 0
    for (mbs, d, p), best in best_of.items():
        for frac in (1 + 1e-9, 1.3, 1 - 1e-6, 0.9, 0.7):
            tr = _Triple(_Search(problem, Budget.starting_now(60.0), best * frac, None), tables[mbs], d, p)
            kept = tr.two_fit_masks(tr.build_masks(tr.y_hi, tr.ar_hi))
            if frac > 1:
                assert kept, (mbs, d, p, frac)  # a plan below the incumbent: the check must keep the triple
                broken_caught += not tr.two_fit_masks(tr.build_masks(tr.y_hi * 0.5, tr.ar_hi))
            elif not kept:
                ruled_out += 1
                assert not (tr.tighten_caps() and tr.lambda_suffix() and tr.two_suffix()), (mbs, d, p)
    assert ruled_out > 0 and broken_caught > 0
    want = min(best_of.values())
    with_it = search(problem, Budget.starting_now(60.0))
    monkeypatch.setattr(hs, "TWO_PRECHECK", False)
    without = search(problem, Budget.starting_now(60.0))
    for got in (with_it, without):
        assert got.complete and got.value == pytest.approx(want, rel=1e-12)
        assert got.bound <= want * (1 + 1e-12) and got.bound == pytest.approx(want, rel=1e-9)
    assert with_it.nodes == without.nodes


@pytest.mark.parametrize("native_on", [True, False])
def test_two_column_fit_test_on_reachable_rows_equals_the_full_table(native_on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`_Triple.two_fit_masks` (the first row only: the rows a split from layer 0 reaches through allowed pairs)
    gives the first row of the full two-column table (:meth:`_Triple.two_tables` with its lists), on random masks
    (pairs with e <= s0 allowed too, as masks under an infinite cap are), every triple of a tiny setting, with the C
    stage and with numpy."""
    import milp_partition.hetero.search as hs

    if not native_on:
        monkeypatch.setattr(native, "_ext", None)
    monkeypatch.setattr(hs, "REACH_MIN_WIDTH", 0)  # the tiny tables are narrow: the rule on all of them
    problem = _tiny("sailor", 3, 3)
    tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
    rng = np.random.default_rng(31)
    fits = misses = 0
    for mbs, tb in tables.items():
        for d in (1, 2, 3):
            for p in (1, 2, 3, 4):
                if d * p > 6 or p > tb.L:
                    continue
                tr = _Triple(_Search(problem, Budget.starting_now(60.0), math.inf, None), tb, d, p)
                for _ in range(12):
                    masks = rng.random((p, len(tb.cfgs), tb.L + 1, tb.L + 1)) < rng.random()
                    full = tr.two_tables(masks)[0][0]
                    row_full = tr.last_two_np[0][0].copy()
                    want = full is not None and bool(full[tr.cap0] <= tr.cap1)
                    assert tr.two_fit_masks(masks) == want, (mbs, d, p)
                    assert np.array_equal(tr.last_two_np[0][0], row_full)
                    fits += want
                    misses += not want
    assert fits > 10 and misses > 10
