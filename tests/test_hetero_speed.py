"""Issue 40, the speed work on the hetero search: every new pruning rule against brute force on tiny settings."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from milp_partition.budget import Budget
from milp_partition.hetero.cost import evaluate
from milp_partition.hetero.problem import HeteroProblem
from milp_partition.hetero.search import _Search, _Tables, search
from milp_partition.io.sailor import read_sailor
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


def _three_columns(objective: str, counts: tuple[int, int, int], blocks: int = 1) -> HeteroProblem:
    """The tiny model of :func:`tests.test_hetero._tiny` on three columns: A100-40 in zones a and b, V100-16 in a."""
    from milp_partition.cluster import KindColumn, kinds_cluster
    from milp_partition.io.sailor import read_links

    base = _tiny(objective, 2, blocks)
    zones = ("us-central1-a", "us-central1-b", "us-central1-a")
    kinds = ("A100-40", "A100-40", "V100-16")
    cols = tuple(KindColumn(k, z, n) for k, z, n in zip(kinds, zones, counts))
    links = read_links(HETERO, set(kinds), set(zones))
    return replace(base, cluster=kinds_cluster(base.cluster.kinds, cols, links))


@pytest.mark.parametrize(
    ("objective", "counts"), [("sailor", (1, 2, 2)), ("sound", (2, 1, 2)), ("sailor", (2, 2, 1)), ("sailor", (1, 1, 3))]
)
def test_three_columns_match_brute_force(objective: str, counts: tuple[int, int, int]) -> None:
    """Three (kind, zone) columns (the device relaxation weighs every subset of columns there): the search's value and
    bound equal the best of every plan enumerated, and the bound is below every plan."""
    problem = _three_columns(objective, counts)
    want = min(evaluate(problem, plan).iteration_s for plan in _plans(problem))
    got = search(problem, Budget.starting_now(60.0))
    assert got.complete
    assert got.value == pytest.approx(want, rel=1e-12)
    assert got.bound <= want * (1 + 1e-12) and got.bound == pytest.approx(want, rel=1e-9)


def test_device_test_with_subset_weights_on_three_columns() -> None:
    """:meth:`_Search.devices_admit` on three columns (every subset of columns weighted): it admits every triple whose
    best plan (all enumerated) is below the incumbent, and rules out some triple with feasible plans at the optimum."""
    problem = _three_columns("sailor", (1, 2, 2))
    best = _best_per_triple(problem)
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
    assert len(srch.lambda_weights(tables[1])[0]) == 8  # 7 subsets and one over the counts
    for (mbs, d, p), v in best.items():
        srch.out.value = v * (1 + 1e-9)
        assert srch.devices_admit(tables[mbs], d, p), (mbs, d, p)
    srch.out.value = min(best.values()) * (1 + 1e-9)
    assert any(not srch.devices_admit(tables[mbs], d, p) for (mbs, d, p) in best)


def test_subset_weights_rule_out_more_than_single_columns_on_three_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every subset of the three columns weighted, the device test rules out more triples (each with feasible
    plans, every one above the incumbent) than with each column alone, all of them and one over the counts (the
    weights before): the pair of A100-40 zones is budgeted together."""
    import milp_partition.hetero.search as hs

    problem = _three_columns("sailor", (1, 2, 2))
    best = _best_per_triple(problem)
    opt = min(best.values())

    def ruled_out() -> int:
        n = 0
        for frac in (1.0, 1.05, 1.1, 1.2):
            srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
            tables = {mbs: _Tables(problem, mbs) for mbs in problem.micro_batches()}
            srch.out.value = opt * frac
            n += sum(not srch.devices_admit(tables[mbs], d, p) for (mbs, d, p) in best if best[(mbs, d, p)] >= opt * frac)
        return n

    with_subsets = ruled_out()

    def before(caps: list[int]) -> list[tuple[float, ...]]:
        n = len(caps)
        lams = [tuple(1.0 if j == jj else 0.0 for j in range(n)) for jj in range(n)]
        return [*lams, tuple(1.0 for _ in range(n)), tuple(1.0 / max(1, c) for c in caps)]

    monkeypatch.setattr(hs, "_weight_vectors", before)
    assert with_subsets > ruled_out()


def test_allreduce_table_is_the_exact_bound_within_1e9_entry_by_entry() -> None:
    """:func:`set_allreduce_lb` (numpy per entry, the exact loop only where a fit is not well conditioned on the
    entry's size) on GPT-Neo-2.7, whose last layer alone is a 5 kB stage (there the fits are ill-conditioned): every
    entry of every reduced set, one and two columns, is at most :meth:`_Search.ar_lb` (the exact bucket loop of the
    least cross-column pair) and within 1e-9 of it; some entry is ill-conditioned (the loop is used) and most are not."""
    import numpy as np

    from milp_partition.hetero.search import _Triple, _well_conditioned_each, set_allreduce_lb
    from milp_partition.io.sailor import read_sailor

    problem = read_sailor(HETERO, setting="gptneo-a32-v96")
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tb = _Tables(problem, problem.micro_batches()[0])
    L = tb.L
    w1 = np.array(tb.w1pre)
    sizes = (w1[None, :] - w1[:, None])[np.triu_indices(L + 1, 1)]
    c0 = tb.cols[0]  # A100-40 within its zone: its fit is ill-conditioned on the last layer's 20 kB
    coef = problem.cluster.link_fit((c0.zone, c0.kind, 1, c0.zone, c0.kind, 1)).coefficients
    good = _well_conditioned_each(sizes, 7, coef)
    assert not good.all() and good.mean() > 0.9
    for d in (2, 7, 16):
        sets = _Triple(srch, tb, d, 2).sets
        assert any(len({tb.cfgs[c][0] for c in q}) == 2 for q in sets)
        tab = set_allreduce_lb(srch, tb, sets, d)
        for qi, q in enumerate(sets):
            for s0 in range(L):
                for e in range(s0 + 1, L + 1):
                    exact = srch.ar_lb(tb, q, s0, e, d)
                    assert tab[qi, s0, e] <= exact and tab[qi, s0, e] >= exact - 2e-9 * abs(exact), (q, s0, e)


def test_allreduce_table_of_pooled_links_is_below_the_exact_bound() -> None:
    """On a pooled problem (gptneo-a32x5-b1024's zones pooled per region: two columns whose links are the least of
    several fits, :class:`milp_partition.hetero.pool.MinLinkFit`), :func:`set_allreduce_lb` reads every part of a link:
    every entry of every reduced set is at most :meth:`_Search.ar_lb` (which prices the link as the plans are priced)
    and within 1e-9 of it.  (Reading a pooled link's first part alone put the table above the link on this setting,
    and the region pool's search then proved a bound 7.5903 s above a plan of 7.5828 s: a false proof.)"""
    from milp_partition.hetero.pool import MinLinkFit, pooled_problem, region_groups
    from milp_partition.hetero.search import _Triple, set_allreduce_lb
    from milp_partition.io.sailor import read_sailor

    root = Path(__file__).resolve().parents[1]
    problem = read_sailor(HETERO, setting_file=root / "benchmarks" / "hetero_heldback" / "gptneo-a32x5-b1024.json")
    pooled = pooled_problem(problem, region_groups(problem))
    cols = pooled.cluster.columns
    assert len(cols) == 2 and isinstance(
        pooled.cluster.link_fit((cols[0].zone, cols[0].kind, 1, cols[1].zone, cols[1].kind, 1)), MinLinkFit
    )
    srch = _Search(pooled, Budget.starting_now(60.0), math.inf, None)
    tb = _Tables(pooled, pooled.micro_batches()[0])
    for d in (2, 8, 16):
        sets = _Triple(srch, tb, d, 2).sets
        tab = set_allreduce_lb(srch, tb, sets, d)
        for qi, q in enumerate(sets):
            for s0 in range(tb.L):
                for e in range(s0 + 1, tb.L + 1):
                    exact = srch.ar_lb(tb, q, s0, e, d)
                    assert exact - 2e-9 * abs(exact) <= tab[qi, s0, e] <= exact, (d, q, s0, e)


@pytest.mark.parametrize("objective", ["sailor", "sound"])
def test_listing_bounds_of_every_depth_at_once_equal_the_triple_bound(objective: str) -> None:
    """:meth:`_Search.degree_bounds` (the listing's bounds of many D and every P at once, without the split and the
    quick one) equals :meth:`_Search.triple_bound` float for float, on OPT-350 (26 layers) over 8 + 16 devices, every
    micro-batch size, D and P; and the quick bound is at least the one without the split (it adds the split)."""
    import numpy as np

    problem = read_sailor(HETERO, setting="opt350-a8-v16", objective=objective)
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    compared = raised = 0
    for mbs in problem.micro_batches():
        tb = _Tables(problem, mbs)
        if not tb.cfgs or not all(math.isfinite(x) for x in tb.cmin):
            continue
        total = sum(tb.caps)
        ds = np.arange(1, total + 1)
        fs = np.full((tb.L + 1, 2), -math.inf)
        for p in range(1, tb.L + 1):
            fs[p] = srch.free_split(tb, p)
        plain, quick = srch.degree_bounds(tb, ds, None), srch.degree_bounds(tb, ds, fs)
        for d in ds.tolist():
            for p in range(1, min(tb.L, total // d) + 1):
                i, j = d - 1, p - 1
                assert plain[i, j] == srch.triple_bound(tb, d, p, split=False), (mbs, d, p)
                assert quick[i, j] == srch.triple_bound(tb, d, p, quick=True), (mbs, d, p)
                assert quick[i, j] >= plain[i, j]
                compared += 1
                raised += quick[i, j] > plain[i, j]
    assert compared > 200 and raised > 0


def test_stage_tables_shared_between_in_flight_counts_equal_their_definition() -> None:
    """The stages' least-y tables (:meth:`_Search.ylb_part`, :meth:`_Search.stage_ymin`), shared between in-flight
    counts whose memory fit rows are the same, equal their definition computed afresh for every (P, stage): a
    configuration's compute over s..e-1 plus its least sends of the stage's role, inf where it does not hold the layers
    with P - k micro-batches in flight; the stage's table the least over the configurations.  Some are shared."""
    import numpy as np

    problem = read_sailor(HETERO, setting="gptneo-a32-v96")
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tb = _Tables(problem, 1)
    srch.send_tables(tb)
    amin_c, bmin_c = tb.misc[("ab", srch.sound)]
    for p in (1, 2, 5, 12, 34):
        for k in range(p):
            role = srch.send_role(p, k)
            want = np.full((tb.L + 1, tb.L + 1), math.inf)
            for c in range(len(tb.cfgs)):
                a, b = np.array(amin_c[c])[None, :], np.array([*bmin_c[c], 0.0])[:, None]
                x = {"none": 0.0, "a": a, "2a": 2 * a, "b": b, "2b": 2 * b, "a+b": a + b}[role]
                ok = [[e > s and tb.fits(c, s, e, p - k) for e in range(tb.L + 1)] for s in range(tb.L + 1)]
                got_c = np.where(np.array(ok), tb.comp_matrix(c) + x, math.inf)
                assert np.array_equal(srch.ylb_part(tb, c, p - k, role), got_c), (p, k, c)
                want = np.minimum(want, got_c)
            assert np.array_equal(srch.stage_ymin(tb, p, k), want), (p, k)
    parts = tb.misc[("ylbpart", srch.sound)]
    assert len({id(a) for a in parts.values()}) < len(parts)  # in-flight counts with one fit row share an array


def test_batched_allreduce_tables_equal_the_per_degree_tables_of_every_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`_Search.min_ar_table` computes AR_BATCH degrees at once on the distinct sizes only, and the set tables read
    every part of a pooled link's conditioning at once (:func:`_well_conditioned_all`): on gptneo-a32x5-b1024's region
    pools (links the least of several fits), the tables of several D equal the per-entry, per-degree form (the least over
    the column pairs' rings of each entry's own size, lowered by 1e-9), and the conditioning test of all parts equals the
    test of each part, entry by entry."""
    import numpy as np

    from milp_partition.hetero import search as hs
    from milp_partition.hetero.pool import fit_parts, pooled_problem, region_groups
    from milp_partition.io.sailor import read_sailor

    root = Path(__file__).resolve().parents[1]
    problem = read_sailor(HETERO, setting_file=root / "benchmarks" / "hetero_heldback" / "gptneo-a32x5-b1024.json")
    pooled = pooled_problem(problem, region_groups(problem))
    srch = _Search(pooled, Budget.starting_now(60.0), math.inf, None)
    tb = _Tables(pooled, 1)
    L = tb.L
    pre = np.array(tb.w1pre)
    fits = {fit_parts(pooled.cluster.link_fit((a.zone, a.kind, 1, b.zone, b.kind, 1))) for a in tb.cols for b in tb.cols}
    assert any(len(parts) > 1 for parts in fits)
    for d in (2, 3, 9, 40, 41, 77):
        table = srch.min_ar_table(tb, d)
        for tp, got in table.items():
            for s0 in range(L):
                sizes = (pre[s0 + 1 :] - pre[s0]) / min(4, tp)
                want = np.min([hs._bucketed_vec_min(sizes, d, parts) for parts in fits], axis=0)
                want = want - 1e-9 * np.abs(want)
                assert np.allclose(got[s0, s0 + 1 :], want, rtol=1e-14, atol=0.0), (d, tp, s0)
            assert np.isinf(got[np.tril_indices(L + 1)]).all()
        sizes = (pre[None, :] - pre[:, None])[np.triu_indices(L + 1, 1)]
        for parts in fits:
            each = np.logical_and.reduce([hs._well_conditioned_each(sizes, d, coef) for coef in parts])
            assert np.array_equal(hs._well_conditioned_all(sizes, d, parts), each)


@pytest.mark.parametrize("which", ["capped", "regions"])
def test_the_listing_by_chunks_of_degrees_equals_the_triple_by_triple_form(which: str) -> None:
    """:meth:`_Search.list_triples` computes the bounds of 64 degrees at once (:meth:`_Search.list_degrees`): on
    gptneo-a32x5-b1024's capped pool and its region pools (the triples of more than N_A devices), the triples listed,
    their keys and their order are those of the triple-by-triple form (:meth:`_Search.triple_bound` per (D, P): the
    bound without the split below the incumbent, the degree rule, the quick bound as the key)."""
    from milp_partition.heuristics.hetero_even import best_uniform_plan

    from milp_partition.hetero.pool import capped_pool_problem, device_split, pooled_problem, region_groups
    from milp_partition.hetero.search import PRUNE_REL
    from milp_partition.io.sailor import read_sailor

    root = Path(__file__).resolve().parents[1]
    problem = read_sailor(HETERO, setting_file=root / "benchmarks" / "hetero_heldback" / "gptneo-a32x5-b1024.json")
    split = device_split(problem)
    assert split is not None
    if which == "capped":
        pooled, min_devices = capped_pool_problem(problem, split), 0
    else:
        pooled, min_devices = pooled_problem(problem, region_groups(problem)), split + 1
    value = best_uniform_plan(pooled)[1] * 0.995
    srch = _Search(pooled, Budget.starting_now(600.0), value, None)
    srch.min_devices = min_devices
    got, floors, tables = srch.list_triples()
    assert not floors and len(got) > 100
    ref = _Search(pooled, Budget.starting_now(600.0), value, None)
    ref.min_devices = min_devices
    want = []
    for mbs, tb in tables.items():
        total = sum(tb.caps)
        for d in range(1, total + 1):
            plist = [p for p in range(1, min(tb.L, total // d) + 1) if d * p * tb.tp_max >= min_devices]
            if not plist:
                continue
            listed = [p for p in plist if ref.triple_bound(tb, d, p, split=False) * (1 - PRUNE_REL) < value]
            if not listed or ref.dominated_by_fewer(tb, d):
                continue
            want.extend((ref.triple_bound(tb, d, p, quick=True), mbs, d, p) for p in listed)
    assert got == want
