"""The pooled relaxation of settings with several zones of one kind (:mod:`milp_partition.hetero.pool`): its bound is
below every plan (brute force on tiny settings with duplicated zones), its lifted plans fit the zones, and the solve
with and without it gives the same status, value and bound where both finish."""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from milp_partition.budget import Budget
from milp_partition.chain import Status
from milp_partition.cli.dispatch import main
from milp_partition.cluster import KindColumn, kinds_cluster
from milp_partition.hetero.cost import bucketed_seconds, evaluate
from milp_partition.hetero.leaf import best_of_leaf, leaf_size
from milp_partition.hetero.pool import MinLinkFit, groupings, lift, poolable, pooled_problem
from milp_partition.hetero.pooled import pooled_bound
from milp_partition.hetero.problem import HeteroProblem, plan_to_sailor
from milp_partition.hetero.search import _bucketed_vec_min, search
from milp_partition.hetero.solve import HeteroSolveSettings, solve_hetero
from milp_partition.io.sailor import build_problem
from milp_partition.verifiers.hetero import verify_hetero
from tests.test_hetero import HETERO, _plans, _tiny

pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")


def _zoned(counts: dict[str, int], blocks: int = 3, global_batch: int = 512, objective: str = "sailor") -> HeteroProblem:
    """:func:`tests.test_hetero._tiny`'s model (embedding, ``blocks`` blocks, head of OPT-350) on the columns ``counts``
    (``<kind>_<zone>`` -> devices), with the network fits of those zones."""
    tiny = _tiny(objective, 2, blocks)
    full = build_problem(HETERO, {"name": "zoned", "model": "OPT-350", "gpus": counts}, source="test", objective=objective)
    cols = tuple(KindColumn(c.kind, c.zone, c.count) for c in full.cluster.columns)
    cluster = kinds_cluster(full.cluster.kinds, cols, full.cluster.link_fits)
    return replace(tiny, cluster=cluster, global_batch=global_batch)


def _random_counts(seed: int) -> dict[str, int]:
    """A random tiny setting with one kind in two zones at least (4 devices at most: every plan is enumerated)."""
    rng = random.Random(seed)
    zones = ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f", "us-west1-b"]
    kind = rng.choice(["A100-40", "V100-16"])
    za, zb = rng.sample(zones, 2)
    out = {f"{kind}_{za}": rng.randint(1, 2), f"{kind}_{zb}": 1}
    if sum(out.values()) < 4 and rng.random() < 0.7:
        other = "V100-16" if kind == "A100-40" else "A100-40"
        out[f"{other}_{rng.choice(zones)}"] = 1
    return out


ZONED = [
    {"A100-40_us-central1-a": 2, "A100-40_us-central1-b": 2},
    {"A100-40_us-central1-a": 2, "A100-40_us-west1-b": 2},
    {"V100-16_us-central1-a": 2, "V100-16_us-central1-b": 1, "A100-40_us-central1-f": 1},
    {"A100-40_us-central1-a": 1, "A100-40_us-central1-b": 1, "V100-16_us-central1-a": 1, "V100-16_us-central1-b": 1},
    {"A100-40_us-central1-a": 1, "A100-40_us-central1-b": 1, "A100-40_us-west1-b": 2},
    *[_random_counts(seed) for seed in (0, 1, 4, 6)],
]


def test_region_pools_lie_between_the_kind_pool_and_the_setting() -> None:
    """A kind in two regions: the pools per kind and region refine the pool per kind, so their optimum lies between
    the kind pool's and the setting's (brute force)."""
    problem = _zoned({"A100-40_us-central1-a": 1, "A100-40_us-central1-b": 1, "A100-40_us-west1-b": 2})
    want = min(evaluate(problem, p).iteration_s for p in _plans(problem))
    kind_pool, region_pool = groupings(problem)
    assert len(set(kind_pool.values())) == 1 and len(set(region_pool.values())) == 2
    lo = search(pooled_problem(problem, kind_pool), Budget.starting_now(60.0))
    mid = search(pooled_problem(problem, region_pool), Budget.starting_now(60.0))
    assert lo.complete and mid.complete
    assert lo.bound <= mid.bound * (1 + 1e-12) and mid.bound <= want * (1 + 1e-12)


@pytest.mark.parametrize("counts", ZONED)
@pytest.mark.parametrize("objective", ["sailor", "sound"])
def test_pooled_bound_is_below_every_plan_and_the_solve_matches_brute_force(counts: dict[str, int], objective: str) -> None:
    """Every plan of the setting enumerated (P up to 4 over 5 layers, D up to 4, replicas across zones): the pooled
    problem's proven bound (its optimum) is at most the setting's optimum, every plan renamed to the pools is no slower
    there, and the solve with and without the pool step proves the brute-force optimum (status, value and bound: the
    ring's cross-column pair and the leaves priced plan by plan, :mod:`milp_partition.hetero.leaf`, close these)."""
    problem = _zoned(counts, objective=objective)
    assert poolable(problem)
    plans = list(_plans(problem))
    values = [evaluate(problem, p).iteration_s for p in plans]
    want = min(values)
    pooled = pooled_problem(problem)
    got = search(pooled, Budget.starting_now(60.0))
    assert got.complete and got.bound <= want * (1 + 1e-12)
    pool_of = {c.kind: c.zone for c in pooled.cluster.columns}
    for plan, v in zip(plans, values):
        renamed = replace(plan, replicas=tuple(tuple(replace(r, zone=pool_of[r.kind]) for r in row) for row in plan.replicas))
        assert evaluate(pooled, renamed).iteration_s <= v * (1 + 1e-12)
    for pool in (True, False):
        res = solve_hetero(problem, HeteroSolveSettings(time_limit_s=60.0, pool=pool, pool_stop_gap=0.0))
        assert res.status == Status.OPTIMAL.value
        assert res.objective == pytest.approx(want, rel=1e-12)
        assert res.bound <= want * (1 + 1e-9) and res.bound == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("counts", ZONED)
def test_lifted_plans_fit_the_zones(counts: dict[str, int]) -> None:
    """The pooled optimum lifted to the zones: a plan the independent verifier accepts, at its exact value, at least
    the pooled optimum (the pool is a relaxation)."""
    problem = _zoned(counts)
    pooled = pooled_problem(problem)
    got = search(pooled, Budget.starting_now(60.0))
    plan, v = lift(problem, got.plan)
    if plan is None:  # a pooled plan may need a tp group across two zones: no lift, nothing claimed
        assert math.isinf(v)
        return
    rep = verify_hetero(problem, plan_to_sailor(plan))
    assert rep.feasible, rep.violations
    assert rep.iteration_s == pytest.approx(v, rel=1e-12)
    assert v >= got.value * (1 - 1e-12)
    # the lift prices its candidates with one memo of the sends and all-reduces: the same float as alone
    assert evaluate(problem, plan).iteration_s == v


def test_min_fit_bucketed_vector_is_the_scalar_sum_of_least_pieces() -> None:
    """The search's vector all-reduce over a pooled link equals :func:`bucketed_seconds` over :class:`MinLinkFit`
    (the least fit per bucket) and is at most every part's own all-reduce."""
    problem = build_problem(
        HETERO, {"model": "OPT-350", "gpus": {"A100-40_us-central1-a": 1, "A100-40_us-west1-b": 1}}, source="test"
    )
    cl = problem.cluster
    parts = tuple(
        cl.link_fits[(z, "A100-40", 1, z2, "A100-40", 1)].coefficients
        for z in ("us-central1-a", "us-west1-b")
        for z2 in ("us-central1-a", "us-west1-b")
    )
    fit = MinLinkFit(parts[0], parts)
    rng = random.Random(7)
    sizes = np.array([rng.uniform(4e6, 3e9) for _ in range(40)] + [5e8, 1e9, 1.5e9 + 3])
    for n in (2, 5, 17):
        vec = _bucketed_vec_min(sizes, n, parts)
        for x, got in zip(sizes.tolist(), vec.tolist()):
            assert got == pytest.approx(bucketed_seconds(fit, x, n), rel=1e-12)
            for c in parts:
                assert got <= bucketed_seconds(MinLinkFit(c, (c,)), x, n) * (1 + 1e-12)


def test_a_spent_budget_still_gives_sound_pooled_bounds() -> None:
    """No time at all: each pooled search stops at once with the bound of its first (mbs, D, P), at or below the
    brute-force optimum; the solve's bound too, and its plan is a verified one at or above the optimum."""
    problem = _zoned({"A100-40_us-central1-a": 1, "A100-40_us-central1-b": 1, "A100-40_us-west1-b": 2})
    want = min(evaluate(problem, p).iteration_s for p in _plans(problem))
    for groups in groupings(problem):
        got = pooled_bound(problem, Budget.starting_now(0.0), groups)
        assert not got.complete and got.bound_s is not None and 0 < got.bound_s <= want * (1 + 1e-12)
    res = solve_hetero(problem, HeteroSolveSettings(time_limit_s=0.0))
    assert res.objective >= want * (1 - 1e-12) and res.bound <= want * (1 + 1e-12)


def test_a_small_leaf_is_priced_plan_by_plan() -> None:
    """:func:`milp_partition.hetero.leaf.best_of_leaf` against brute force: for every (mbs, D, stages, reduced sets)
    of a tiny three-column setting, its value is the least over the enumerated plans that reduce to that leaf."""
    problem = _zoned({"A100-40_us-central1-a": 1, "A100-40_us-central1-b": 1, "V100-16_us-central1-a": 2}, blocks=1)
    cols = [(c.kind, c.zone, c.count) for c in problem.cluster.columns if c.count > 0]
    col_of = {(k, z): j for j, (k, z, _n) in enumerate(cols)}
    best: dict[tuple[object, ...], float] = {}
    for plan in _plans(problem):
        cfgs = sorted({(col_of[(r.kind, r.zone)], r.tp) for row in plan.replicas for r in row})
        sets = []
        for row in plan.replicas:
            least: dict[int, int] = {}
            for r in row:
                j = col_of[(r.kind, r.zone)]
                least[j] = min(least.get(j, r.tp), r.tp)
            sets.append(tuple(sorted(least.items())))
        key = (plan.mbs, plan.dp, plan.stages, tuple(sets))
        v = evaluate(problem, plan).iteration_s
        best[key] = min(best.get(key, math.inf), v)
    assert len(best) > 20
    for (mbs, d, stages, sets), want in best.items():
        cfgs = [(j, tp) for j in range(len(cols)) for tp in (1, 2, 4) if problem.replica_valid(cols[j][0], mbs, tp)]
        chosen = [(s, e, tuple(cfgs.index(m) for m in q)) for (s, e), q in zip(stages, sets)]
        assert leaf_size(cfgs, [c[2] for c in cols], d, chosen) <= 4096
        got, plan = best_of_leaf(problem, cols, cfgs, mbs, d, chosen)
        assert got == pytest.approx(want, rel=1e-12)
        assert plan is not None and verify_hetero(problem, plan_to_sailor(plan)).feasible


@pytest.mark.parametrize("calls", [1, 2, 3, 5, 8, 13, 21, 40, 80])
def test_a_budget_spent_at_any_point_leaves_a_sound_bound(calls: int) -> None:
    """A clock that jumps past the limit after ``calls`` readings stops the search wherever it is (listing the
    triples, phase 1, phase 2, a leaf): its bound stays at or below the brute-force optimum and its plan, when it has
    one, at or above it."""
    problem = _zoned({"A100-40_us-central1-a": 2, "A100-40_us-west1-b": 2})
    want = min(evaluate(problem, p).iteration_s for p in _plans(problem))
    seen = [0]

    def clock() -> float:
        seen[0] += 1
        return 0.0 if seen[0] <= calls else 100.0

    got = search(problem, Budget.starting_now(1.0, clock))
    assert got.bound <= want * (1 + 1e-12)
    assert got.plan is None or got.value >= want * (1 - 1e-12)
    if not got.complete:
        assert got.stopped_by == "time_limit"


@pytest.mark.parametrize(
    ("gpus", "model", "code"),
    [
        ({"V100-16_us-central1-a": 1, "V100-16_us-central1-b": 1}, "GPT-Neo-2.7", 3),  # nothing fits: infeasible
        ({"V100-16_us-central1-a": 2}, "GPT-Neo-2.7", 3),
        ({"A100-40_us-central1-a": 1, "A100-40_us-central1-b": 2}, "OPT-350", 0),
    ],
)
def test_fewer_than_four_devices_solve(tmp_path: Path, gpus: dict[str, int], model: str, code: int) -> None:
    """Fewer devices than the largest tp (the budget program's cap below 4; it crashed before): exit 3 when nothing
    fits, else a proven optimum."""
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": model, "global_batch": 64, "gpus": gpus}))
    out = tmp_path / "out.json"
    assert main(["solve", str(HETERO), "--setting-file", str(f), "-q", "--output", str(out)]) == code
    if code == 0:
        assert json.loads(out.read_text())["status"] == "optimal"


def test_the_fills_place_equal_rows_and_replicas_together_as_one_by_one() -> None:
    """:func:`_fill_rows` and :func:`_fill_stages` (equal rows, equal replicas placed together) give the plans of their
    one-at-a-time definitions on random pooled plans of up to 48 replicas (runs of equal rows and replicas, two kinds,
    tps 1-4), for every order of the zones, also where the counts run out (None on both sides)."""
    from milp_partition.hetero.pool import _fill_rows, _fill_rows_by_row, _fill_stages, _fill_stages_by_replica, pool_groups
    from milp_partition.hetero.problem import HeteroPlan, Replica

    counts = {"A100-40_us-central1-a": 16, "A100-40_us-central1-b": 12, "A100-40_us-west1-b": 9, "V100-16_us-central1-a": 10}
    problem = _zoned(counts)
    groups = pool_groups(problem)
    members: dict[tuple[str, str], list[str]] = {}
    for (g, z), pz in groups.items():
        members.setdefault((g, pz), []).append(z)
    keys = sorted(members)
    rng = random.Random(3)
    placed = failed = 0
    for _ in range(60):
        p, d = rng.randint(1, 4), rng.randint(1, 12)
        stages = []
        for _i in range(p):
            kinds = [rng.choice(keys) for _ in range(rng.randint(1, 2))]
            reps: list[Replica] = []
            while len(reps) < d:  # runs of equal replicas
                kind, pz = rng.choice(kinds)
                reps += [Replica(kind, pz, rng.choice([1, 1, 2, 4]))] * rng.randint(1, d)
            stages.append(tuple(reps[:d]))
        if rng.random() < 0.5:  # equal rows: every stage's replicas the same along the row
            stages = [tuple([row[0]] * d) for row in stages]
        plan = HeteroPlan(1, tuple((i, i + 1) for i in range(p)), tuple(stages))
        for combo in itertools.product(*[list(itertools.permutations(members[k])) for k in keys]):
            order = dict(zip(keys, combo))
            for fast, slow in ((_fill_rows, _fill_rows_by_row), (_fill_stages, _fill_stages_by_replica)):
                got, want = fast(problem, plan, order), slow(problem, plan, order)
                assert got == want, (plan, order)
                placed += want is not None
                failed += want is None
    assert placed > 100 and failed > 10


@pytest.mark.parametrize("counts", ZONED)
def test_whole_stage_zone_choices_are_plans_and_never_worse(counts: dict[str, int]) -> None:
    """Every plan of :func:`milp_partition.hetero.pool._whole_stage_plans` (each stage's replicas of a pool in one zone)
    is a plan the independent verifier accepts at its exact value, and the lift with them is never worse than without
    them (``max_whole=0``)."""
    from milp_partition.hetero.pool import _whole_stage_plans, pool_groups

    problem = _zoned(counts)
    groups = pool_groups(problem)
    members: dict[tuple[str, str], list[str]] = {}
    for (g, z), pz in groups.items():
        members.setdefault((g, pz), []).append(z)
    for plan in _plans(pooled_problem(problem)):
        for whole in _whole_stage_plans(problem, plan, members, 1024):
            rep = verify_hetero(problem, plan_to_sailor(whole))
            assert rep.feasible, rep.violations
            assert rep.iteration_s == pytest.approx(evaluate(problem, whole).iteration_s, rel=1e-12)
        _p, with_v = lift(problem, plan, groups)
        _p, without_v = lift(problem, plan, groups, max_whole=0)
        assert with_v <= without_v


def test_whole_stage_zones_lift_the_two_zone_gptneo_plan_closer_to_its_pooled_bound() -> None:
    """The pooled optimum of the held-back gptneo-a128x2-v128x2-b2048 (mbs 1, D 32, stages [3, 7, 7, 7, 7, 3]: V100-16
    tp 4 at both ends, A100-40 tp 2 between) lifted: the two fills alone give 6.9067 s (1.45 % above the pooled
    optimum 6.8063 s); with one zone per stage the A100-40 stages alternate zones, 6.8730 s (within 1 %), a plan the
    independent verifier accepts at that value."""
    from milp_partition.hetero.pool import pool_groups, rename
    from milp_partition.hetero.problem import HeteroPlan, Replica
    from milp_partition.io.sailor import read_sailor

    setting = Path(__file__).resolve().parents[1] / "benchmarks" / "hetero_heldback" / "gptneo-a128x2-v128x2-b2048.json"
    problem = read_sailor(HETERO, setting_file=setting)
    ends = [0, 3, 10, 17, 24, 31, 34]
    kinds = [("V100-16", 4), ("A100-40", 2), ("A100-40", 2), ("A100-40", 2), ("A100-40", 2), ("V100-16", 4)]
    plan = HeteroPlan(
        1,
        tuple(itertools.pairwise(ends)),
        tuple(tuple(Replica(g, "us-central1-a", tp) for _ in range(32)) for g, tp in kinds),
    )
    groups = pool_groups(problem)
    pooled = rename(plan, groups)
    _p, fills = lift(problem, pooled, groups, max_whole=0)
    lifted, v = lift(problem, pooled, groups)
    assert fills == pytest.approx(6.9067, abs=1e-4)
    assert v == pytest.approx(6.8730, abs=1e-4) and v < fills
    assert lifted is not None
    rep = verify_hetero(problem, plan_to_sailor(lifted))
    assert rep.feasible and rep.iteration_s == pytest.approx(v, rel=1e-12)
