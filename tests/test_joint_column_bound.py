"""The column bound (milp_partition/joint/column_bound.py) is a proven lower bound: checked against brute force and the
exact DP, its stage model against the verifier at optimal plans, its pricing against enumeration, its certificate
against a plan's own columns; and it is tight where the stage bound is not."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import cast

import numpy as np
import pytest
from milp_partition.formulations.joint import work_lower_bound_s
from test_joint_bruteforce import brute_force, random_problem
from test_joint_io import GIB

from milp_partition.budget import Budget
from milp_partition.joint import column_bound as cb
from milp_partition.joint.dp import joint_data, search
from milp_partition.joint.generators import parallel_branches
from milp_partition.joint.problem import JointPlan, JointProblem, JointShape, JointStage
from milp_partition.joint.schedule import JointSchedule
from milp_partition.joint.stage_bound import stage_bound_report
from milp_partition.verifiers.joint import verify_joint

#: Generous: these small cases finish in seconds; the searches end on their own (target interval closed), not on time.
BUDGET_S = 600.0


def _optimum(problem: JointProblem) -> tuple[float, JointPlan | None]:
    found = search(joint_data(problem), budget=Budget.starting_now(300.0))
    assert not found.timed_out
    return (math.inf, None) if found.infeasible else (found.value, found.plan)


def _bound(problem: JointProblem, upper: float) -> cb.ColumnBoundReport:
    return cb.column_bound_report(problem, work_lower_bound_s(problem), upper, Budget.starting_now(BUDGET_S))


@pytest.mark.parametrize("seed", range(60))
def test_bound_is_below_the_brute_force_optimum(seed: int) -> None:
    problem = random_problem(seed)
    best = brute_force(problem)
    if math.isinf(best):
        return  # no plan: the bound needs a plan's value to start from
    for upper in (best, best * 1.3):
        assert _bound(problem, upper).bound <= best * (1 + 1e-9)


WIDE = [
    (3, 4, 4, 2.0, 0, None),
    (3, 4, 4, 1.0, 1, None),
    (3, 3, 4, 0.5, 2, None),
    (3, 4, 8, 2.0, 1, None),
    (2, 5, 8, 0.75, 3, None),
    (3, 5, 8, 1.2, 0, None),
    (4, 3, 4, 1.0, 5, JointShape(tensor_parallel=1)),
    (3, 4, 8, 1.0, 6, JointShape(data_parallel=2)),
]


@pytest.mark.parametrize(("branches", "depth", "devices", "memory_gib", "seed", "shape"), WIDE)
def test_bound_is_sound_and_tight_on_small_wide_graphs(
    branches: int, depth: int, devices: int, memory_gib: float, seed: int, shape: JointShape | None
) -> None:
    problem = replace(parallel_branches(branches, depth, devices, memory_gib * GIB, seed=seed), shape=shape)
    best, _ = _optimum(problem)
    if math.isinf(best):
        return
    report = _bound(problem, best)
    assert report.bound <= best * (1 + 1e-9)
    # the configuration LP is close to the integer program: within 1% on every case here (the stage bound's
    # relaxation alone is 3-10% short on some of them)
    assert report.bound >= best * 0.99
    assert report.proven and max(report.proven) <= best * (1 + 1e-9)
    assert report.bound_after_s > 0  # when its best target was proven (seconds from the start)


def test_it_beats_the_stage_bound_where_that_is_short() -> None:
    # three branches of four on 4 devices at 1 GiB: the stage bound's relaxation stays 7% below the optimum; the
    # column bound proves within 0.1%
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=1)
    best, _ = _optimum(problem)
    column = _bound(problem, best).bound
    stage = stage_bound_report(problem, work_lower_bound_s(problem), best, Budget.starting_now(BUDGET_S), branching=False)
    assert column <= best * (1 + 1e-9)
    assert column >= best * 0.999
    assert stage.bound < best * 0.97


def _plan_columns(problem: JointProblem, plan: JointPlan) -> list[tuple[cb.StageType, tuple[int, ...], tuple[int, ...]]]:
    """The plan's stages as the module's columns: type and the interval of every chain."""
    data = cb._data(problem, 1.0)
    index = {nd.id: v for v, nd in enumerate(problem.nodes)}
    stage_of = {index[v]: g for g, st in enumerate(plan.stages) for v in st.nodes}
    m = len(plan.stages)
    s_after = [sum(st.data_parallel for st in plan.stages[g:]) for g in range(m)]
    cols = []
    for g, st in enumerate(plan.stages):
        a, e = [], []
        for h, length in enumerate(data.lengths):
            positions = [pos for pos in range(length) if stage_of[int(data.cd.node[h, pos])] == g]
            before = sum(1 for pos in range(length) if stage_of[int(data.cd.node[h, pos])] < g)
            if positions:
                assert positions == list(range(positions[0], positions[-1] + 1))  # one interval per chain
            a.append(before)
            e.append(before + len(positions))
        ty = cb.StageType(st.data_parallel, st.tensor_parallel, s_after[g], g == 0, g == m - 1)
        cols.append((ty, tuple(a), tuple(e)))
    return cols


@pytest.mark.parametrize(("branches", "depth", "devices", "memory_gib", "seed"), [(3, 4, 4, 1.0, 1), (3, 5, 8, 1.2, 0)])
def test_an_optimal_plans_stages_fit_and_telescope(branches: int, depth: int, devices: int, memory_gib: float, seed: int) -> None:
    # the model's (c) and (d) at an optimal plan: each stage is an option choice that fits at the optimum (the
    # verifier's time per sample; parallel branches have no sync bytes and no dropped edges, so the times agree)
    problem = parallel_branches(branches, depth, devices, memory_gib * GIB, seed=seed)
    best, plan = _optimum(problem)
    assert plan is not None
    rep = verify_joint(problem, plan)
    data = cb._data(problem, best)
    cols = _plan_columns(problem, plan)
    for (ty, a, e), stage in zip(cols, rep.stages):
        opts = cb._options(data, ty.d, ty.t, ty.y, ty.first, ty.last)
        least = math.inf
        for choice in itertools.product(
            *[np.flatnonzero((opts.a[h] == a[h]) & (opts.e[h] == e[h])) for h in range(len(data.lengths))]
        ):
            mem = sum(opts.mem[h][o] for h, o in enumerate(choice))
            if mem <= 1 + 1e-9:
                least = min(least, sum(opts.time[h][o] for h, o in enumerate(choice)))
        # the least time of the stage's intervals under its memory: the plan's own configurations are one choice
        assert least * best <= ty.d * stage.time_per_sample_s * (1 + 1e-9)
        assert least <= ty.d * (1 + 1e-9)
    # for any duals the link terms of a plan's columns sum to zero (the certificate's premise)
    rng = np.random.default_rng(0)
    for _ in range(5):
        pi = {
            (h, j, s): float(rng.normal())
            for h, length in enumerate(data.lengths)
            for j in range(length + 1)
            for s in range(1, devices + 1)
        }
        total = 0.0
        for ty, a, e in cols:
            for h in range(len(a)):
                total += (0.0 if ty.last else pi[(h, e[h], ty.s - ty.d)]) - (0.0 if ty.first else pi[(h, a[h], ty.s)])
        assert abs(total) < 1e-9


def test_pricing_matches_enumeration_and_the_python_search() -> None:
    problem = parallel_branches(3, 3, 4, 1.0 * GIB, seed=4)
    data = cb._data(problem, 0.004)
    rng = np.random.default_rng(1)
    for ty in cb.stage_types(problem)[:12]:
        opts = cb._options(data, ty.d, ty.t, ty.y, ty.first, ty.last)
        values = [rng.normal(size=opts.a[h].size) for h in range(len(data.lengths))]
        cap = ty.d * 1.0
        upper, choices, exact = cb._price(values, opts, cap)
        brute = -math.inf
        for choice in itertools.product(*[range(opts.a[h].size) for h in range(len(data.lengths))]):
            tm = sum(opts.time[h][o] for h, o in enumerate(choice))
            mm = sum(opts.mem[h][o] for h, o in enumerate(choice))
            if tm <= cap and mm <= 1.0:
                brute = max(brute, sum(values[h][o] for h, o in enumerate(choice)))
        assert exact
        assert upper == pytest.approx(brute, rel=1e-12, abs=1e-12)
        if math.isfinite(brute):
            assert choices and sum(values[h][o] for h, o in enumerate(choices[-1])) == pytest.approx(brute, abs=1e-12)


def test_the_python_branch_and_bound_agrees_with_the_compiled_one(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=1)
    best, _ = _optimum(problem)
    compiled = _bound(problem, best).bound
    monkeypatch.setattr(cb, "_ext", None)
    assert _bound(problem, best).bound == pytest.approx(compiled, rel=1e-6)


def test_lagrangian_upper_bound_is_valid_when_the_search_stops_early() -> None:
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=2)
    data = cb._data(problem, 0.004)
    rng = np.random.default_rng(3)
    for ty in cb.stage_types(problem)[:8]:
        opts = cb._options(data, ty.d, ty.t, ty.y, ty.first, ty.last)
        values = [rng.normal(size=opts.a[h].size) for h in range(len(data.lengths))]
        exact, _, done = cb._price(values, opts, ty.d * 1.0)
        early, _, _ = cb._price(values, opts, ty.d * 1.0, max_nodes=1)
        assert done
        assert early >= exact - 1e-12  # an upper bound either way


def test_a_stopped_search_bounds_by_its_open_branches() -> None:
    # stopped at its node limit, the search returns the least of the root's Lagrangian bound and the largest bound of
    # the branches it left open (or its best): an upper bound still, and below the root's bound where the search got
    # somewhere (test_the_compiled_pricing_matches_the_python_one: the Python search stops with the same numbers)
    problem = parallel_branches(4, 4, 8, 1.0 * GIB, seed=3)
    data = cb._data(problem, 0.004)
    rng = np.random.default_rng(11)
    tighter = 0
    for ty in cb.stage_types(problem)[:24]:
        opts = cb._options(data, ty.d, ty.t, ty.y, ty.first, ty.last)
        values = [rng.normal(size=opts.a[h].size) for h in range(len(data.lengths))]
        exact, _, done = cb._price(values, opts, ty.d * 1.0)
        root, _, _ = cb._price(values, opts, ty.d * 1.0, max_nodes=0)  # nothing explored: the root's bound
        assert done and root >= exact - 1e-12
        for nodes in (5, 50, 500):
            early, _, finished = cb._price(values, opts, ty.d * 1.0, max_nodes=nodes)
            assert exact - 1e-12 <= early <= root + 1e-12
            tighter += not finished and early < root - 1e-9
    assert tighter > 0


def test_twin_types_are_priced_once_with_the_same_answers() -> None:
    # with duals equal across the states of a band, types that differ only in their states within the same bands (and
    # micro-batches in flight) have the same options and link terms: one pricing answers for all, and the answers
    # (bounds, choices per type, inexact types) are those of pricing every type
    problem = parallel_branches(3, 3, 16, 1.0 * GIB, seed=1)
    data = cb._data(problem, 0.004)
    types = cb.stage_types(problem)
    rng = np.random.default_rng(2)
    flat = {(h, j): float(rng.normal()) for h in range(3) for j in range(4)}
    pi = {(h, j, s): x for (h, j), x in flat.items() for s in range(1, 17)}  # one band: all states
    every = cb._Pricer(data, types, 1)
    assert len(every.priced) == len(types)
    twins = cb._Pricer(data, types, 1, band=16)
    assert len(twins.priced) < 0.7 * len(types)
    for target in (0.5, 1.0):
        assert twins.price(pi, target, Budget.starting_now(60.0)) == every.price(pi, target, Budget.starting_now(60.0))


def test_inexact_pricing_on_the_longest_path_is_refined_to_a_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    # pricings stopped after a handful of nodes give weak upper bounds, and the certificate fails where the master's
    # LP has none; those on a longest path priced again with more nodes give the proof back: the bound is that of
    # exact pricing, and without the refinement it is lower
    problem = parallel_branches(3, 4, 8, 1.0 * GIB, seed=1)
    best, _ = _optimum(problem)
    exact = _bound(problem, best).bound
    monkeypatch.setattr(cb, "MAX_NODES", 20)
    refined = _bound(problem, best).bound
    monkeypatch.setattr(cb, "MAX_REFINE_NODES", 20)
    weak = _bound(problem, best).bound
    assert weak < refined * (1 - 1e-3)
    assert refined == pytest.approx(exact, rel=1e-6) and refined <= best * (1 + 1e-9)


def test_refinement_searches_deeper_only_where_it_could_prove_and_time_allows() -> None:
    # one type makes the longest path (a single stage): its search stopped early with bound 1 and best leaf -5, so a
    # deeper search could prove; searched again (exact: -3), the certificate holds.  With the best leaf at 2 no
    # search could, and with no time left none is started (a search does not look at the clock)
    problem = parallel_branches(2, 2, 4, 1.0 * GIB, seed=0)
    only = next(ty for ty in cb.stage_types(problem) if ty.first and ty.last)
    calls: list[int] = []

    class Pricer:
        def refine(self, ty: cb.StageType, pi: object, target: float, budget: Budget, nodes: int) -> object:
            calls.append(nodes)
            return [ty], -3.0, [], True, -3.0

    def refine(best: float, seconds: float) -> tuple[float, list[tuple[cb.StageType, list[int]]]] | None:
        upper = {ty: (1.0 if ty == only else -math.inf) for ty in cb.stage_types(problem)}
        pricer = cast(cb._Pricer, Pricer())
        return cb._refine(problem, pricer, {}, 1.0, Budget.starting_now(seconds), upper, {only: best}, 1.0, [only], 1e-9)

    assert refine(-5.0, 60.0) == (-3.0, []) and calls == [10 * cb.MAX_NODES]
    assert refine(2.0, 60.0) == (1.0, []) and len(calls) == 1
    assert refine(-5.0, 1e-9) == (1.0, []) and len(calls) == 1


def test_longest_path_respects_devices_and_states() -> None:
    problem = parallel_branches(2, 2, 4, 1.0 * GIB, seed=0)
    types = cb.stage_types(problem)
    # only single-stage plans count: every other type is made impossible
    upper = {ty: (1.0 if ty.first and ty.last else -math.inf) for ty in types}
    best = cb._longest_path(problem, upper)
    assert best == 1.0
    # two stages of d = 2 (t = 1) use 4 devices: allowed; with t = 2 each they would need 8: not allowed
    upper = {ty: -math.inf for ty in types}
    upper[cb.StageType(2, 2, 4, True, False)] = 5.0
    upper[cb.StageType(2, 2, 2, False, True)] = 5.0
    assert cb._longest_path(problem, upper) == -math.inf
    upper[cb.StageType(2, 1, 4, True, False)] = 1.0
    upper[cb.StageType(2, 1, 2, False, True)] = 2.0
    assert cb._longest_path(problem, upper) == 3.0
    assert cb._longest_path_types(problem, upper) == (
        3.0,
        [cb.StageType(2, 1, 4, True, False), cb.StageType(2, 1, 2, False, True)],
    )


def test_no_bound_without_a_plan_or_with_a_forced_stage_count() -> None:
    problem = parallel_branches(2, 3, 4, 1.0 * GIB, seed=0)
    assert cb.column_bound(problem, 0.5, math.inf, Budget.starting_now(BUDGET_S)) == 0.5
    forced = replace(problem, shape=JointShape(stages=2))
    assert cb.column_bound(forced, 0.25, 1.0, Budget.starting_now(BUDGET_S)) == 0.25


def test_integer_paths_of_its_columns_are_verified_plans() -> None:
    # started from a plan 5% above the optimum: the relaxation allows the targets between, and integer paths of its
    # columns are plans there (every one the verifier accepts, none below the optimum)
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=1)
    best, _ = _optimum(problem)
    report = _bound(problem, best * 1.05)
    assert report.plans
    values = []
    for plan in report.plans:
        checked = verify_joint(problem, plan)
        assert checked.feasible, checked.violations
        values.append(checked.objective)
    assert best * (1 - 1e-9) <= min(values) < best * 1.05
    assert report.bound <= best * (1 + 1e-9)
    assert report.bound >= best * 0.99  # the bound as tight as from the optimum's value


def test_the_chain_runs_it_past_the_dps_cap() -> None:
    # the same graph with the DP's cap lowered below its ideals: the wide-graph path (orders, segment and stage
    # bounds, then the column bound) ends within 1% of the DP's proven optimum, with every figure verified
    from milp_partition.joint.problem import JointSolveSettings
    from milp_partition.joint.solve import solve_joint

    problem = parallel_branches(3, 5, 8, 1.2 * GIB, seed=0)
    best, _ = _optimum(problem)
    settings = JointSolveSettings(
        time_limit_s=BUDGET_S,
        max_ideals=10,
        solver="none",
        schedule=JointSchedule().capped(orders=1.0, orders_below_cap=1.0, segment_bound=1 / 3, stage_bound=2 / 3),
    )
    result = solve_joint(problem, settings)
    assert "too_many_ideals" in result.solver_notes
    assert isinstance(result.solver_notes.get("column_bound"), float)
    assert result.objective is not None and result.bound is not None
    assert result.bound <= best * (1 + 1e-9)
    assert best <= result.objective * (1 + 1e-9)
    assert result.objective <= result.bound * 1.01
    plan = JointPlan(
        tuple(JointStage(tuple(st["nodes"]), st["data_parallel"], st["tensor_parallel"], st["configs"]) for st in result.stages)
    )
    assert verify_joint(problem, plan).objective == pytest.approx(result.objective, rel=1e-9)


def test_pricing_runs_at_smoothed_duals(monkeypatch: pytest.MonkeyPatch) -> None:
    # Wentges' smoothing: after the first round, pricing is at a point between the best duals so far and the
    # master's (which the master alone never gives), and the bound stays sound and as tight
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=1)
    best, _ = _optimum(problem)
    points: list[dict[tuple[int, int, int], float]] = []
    duals: list[dict[tuple[int, int, int], float]] = []
    price, master_duals = cb._Pricer.price, cb._Master.duals

    def recording_price(self, pi, target, budget):  # type: ignore[no-untyped-def]
        points.append(dict(pi))
        return price(self, pi, target, budget)

    def recording_duals(self):  # type: ignore[no-untyped-def]
        got = master_duals(self)
        duals.append(dict(got[2]))
        return got

    monkeypatch.setattr(cb._Pricer, "price", recording_price)
    monkeypatch.setattr(cb._Master, "duals", recording_duals)
    report = _bound(problem, best)
    assert best * 0.99 <= report.bound <= best * (1 + 1e-9)
    assert len(points) > len(duals) // 2 > 0
    assert any(all(p != d for d in duals) for p in points)  # some pricing point is none of the master's duals
    assert cb._smoothed({(0, 1, 2): 1.0}, {(0, 1, 2): -1.0, (1, 0, 1): 0.5}, 0.25) == {(0, 1, 2): -0.5, (1, 0, 1): 0.375}


@pytest.mark.parametrize("alpha", [0.0, 0.9])
def test_bound_is_sound_with_any_smoothing(monkeypatch: pytest.MonkeyPatch, alpha: float) -> None:
    # the certificate holds for any duals: without smoothing and with heavy smoothing the bounds stay below the
    # DP's optimum on the small wide graphs, and the search still ends at the optimum (within 1%)
    monkeypatch.setattr(cb, "SMOOTH_ALPHA", alpha)
    for branches, depth, devices, memory_gib, seed, _ in WIDE[:4]:
        problem = parallel_branches(branches, depth, devices, memory_gib * GIB, seed=seed)
        best, _ = _optimum(problem)
        if math.isinf(best):
            continue
        report = _bound(problem, best * 1.02)
        assert best * 0.99 <= report.bound <= best * (1 + 1e-9)


def test_with_two_threads_the_bounds_run_beside_the_heuristics(monkeypatch: pytest.MonkeyPatch) -> None:
    # threads=2: the segment and stage bounds in a second process while the orders' DP and the polisher run, and
    # the column bound prices with two processes (here a column bound that proves nothing); the chain's bound is
    # proven and never above the optimum
    import os

    from milp_partition.joint import beside
    from milp_partition.joint import solve as solve_module
    from milp_partition.joint.problem import JointSolveSettings

    if not beside.available():
        pytest.skip("no fork start method here")
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=1)
    best, _ = _optimum(problem)
    pids = []
    workers = []
    stage_bound = solve_module.stage_bound

    def recording_stage_bound(*args, **kwargs):  # type: ignore[no-untyped-def]
        value = stage_bound(*args, **kwargs)
        pids.append(os.getpid())  # in the child: the parent's list never sees it
        return value

    def no_column_bound(problem, lower, upper, budget, **kw):  # type: ignore[no-untyped-def]
        workers.append(kw["workers"])
        return cb.ColumnBoundReport(lower)

    monkeypatch.setattr(solve_module, "stage_bound", recording_stage_bound)
    monkeypatch.setattr(solve_module, "column_bound_report", no_column_bound)
    settings = JointSolveSettings(
        time_limit_s=20.0,
        max_ideals=10,
        threads=2,
        solver="none",
        schedule=JointSchedule().capped(orders=1.0, orders_below_cap=1.0),
    )
    result = solve_module.solve_joint(problem, settings)
    for name in ("segment-bound", "stage-bound"):
        assert "beside the heuristics" in next(h for h in result.heuristics if h.name == name).message
    assert pids == []  # it ran in the other process
    assert workers == [2]
    value = result.solver_notes["stage_bound"]
    assert result.solver_notes["segment_bound"] <= value <= best * (1 + 1e-9)
    assert result.bound is not None and value <= result.bound <= best * (1 + 1e-9)
    # one thread: the same bounds, computed here, the stage bound after the column bound
    sequential = solve_module.solve_joint(problem, replace(settings, threads=1))
    assert "beside" not in next(h for h in sequential.heuristics if h.name == "stage-bound").message
    assert pids == [os.getpid()]
    assert workers == [2, 1]


def test_pricing_split_with_a_partner_gives_the_same_rounds() -> None:
    # workers=2: a forked partner prices part of the types each round; the answers are merged in the types' order,
    # so the search is the same one: the same rounds, columns, targets and bound as in one process
    from milp_partition.joint import beside

    if not beside.available():
        pytest.skip("no fork start method here")
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=1)
    best, _ = _optimum(problem)
    one = _bound(problem, best)
    two = cb.column_bound_report(problem, work_lower_bound_s(problem), best, Budget.starting_now(600.0), workers=2)
    assert (two.bound, two.rounds, two.columns, two.proven, two.refuted) == (
        one.bound,
        one.rounds,
        one.columns,
        one.proven,
        one.refuted,
    )
    assert one.rounds > 1 and best * 0.99 <= two.bound <= best * (1 + 1e-9)


def test_the_partners_share_comes_back_here_when_it_dies() -> None:
    from milp_partition.joint import beside

    if not beside.available():
        pytest.skip("no fork start method here")
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=2)
    data = cb._data(problem, 0.004)
    types = cb.stage_types(problem)
    rng = np.random.default_rng(5)
    pi = {(h, j, s): float(rng.normal()) for h in range(3) for j in range(5) for s in range(1, 5)}
    alone = cb._Pricer(data, types, 1)
    assert alone.partner is None
    want = alone.price(pi, 1.0, Budget.starting_now(60.0))
    pricer = cb._Pricer(data, types, 2)
    try:
        assert pricer.partner is not None
        assert pricer.price(pi, 1.0, Budget.starting_now(60.0)) == want  # split, merged in order
        pricer.partner._process.kill()  # the partner dies: its share is priced here
        pricer.partner._process.join(5.0)
        assert pricer.price(pi, 1.0, Budget.starting_now(60.0)) == want
        assert pricer.partner is None
    finally:
        pricer.stop()


def test_the_compiled_pricing_matches_the_python_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # _jointdp.price does the filter, the multipliers' grid, the orders and the branch and bound in one call: the
    # same upper bounds and the same improving leaves as the Python steps around the extension's mckp
    if cb._ext is None or not hasattr(cb._ext, "price"):
        pytest.skip("the extension is not built")
    problem = parallel_branches(4, 3, 4, 1.0 * GIB, seed=6)
    data = cb._data(problem, 0.004)
    rng = np.random.default_rng(7)
    cases = []
    for ty in cb.stage_types(problem)[:16]:
        opts = cb._options(data, ty.d, ty.t, ty.y, ty.first, ty.last)
        values = [rng.normal(size=opts.a[h].size) for h in range(len(data.lengths))]
        for nodes in (cb.MAX_NODES, 3):  # exact, and stopped early (the root's Lagrangian bound)
            cases.append((values, opts, ty.d * 0.7, nodes, cb._price(values, opts, ty.d * 0.7, nodes)))

    class MckpOnly:  # the extension without its one-call pricing: _price's Python steps around mckp
        mckp = staticmethod(cb._ext.mckp)
        lagrange = staticmethod(cb._ext.lagrange)
        undominated = staticmethod(cb._ext.undominated)

    monkeypatch.setattr(cb, "_ext", MckpOnly)
    assert any(math.isfinite(got[0]) for *_, got in cases)
    for values, opts, cap, nodes, got in cases:
        upper, leaves, exact = cb._price(values, opts, cap, nodes)
        assert got[0] == pytest.approx(upper, rel=1e-12, abs=1e-12) and got[2] == exact
        assert got[1] == leaves


def test_the_master_stops_when_its_budget_is_spent() -> None:
    # the LP gets the budget's remaining time as its limit and is not re-solved once that is spent (no overrun)
    problem = parallel_branches(3, 4, 4, 1.0 * GIB, seed=1)
    master = cb._Master(problem.cluster.device_count)
    assert master.solve(Budget.starting_now(0.0)) is None
    assert master.solve(Budget.starting_now(60.0)) == pytest.approx(1.0)  # empty master: only the first row's artificial
    spent = cb.column_bound_report(problem, work_lower_bound_s(problem), 1.0, Budget.starting_now(0.0))
    assert spent.rounds == 0 and spent.bound == work_lower_bound_s(problem)


SMALL_K16 = [(3, 3, 16, 2.0, 0), (3, 3, 16, 1.0, 1), (4, 2, 16, 1.0, 3)]


@pytest.mark.parametrize(("branches", "depth", "devices", "memory_gib", "seed"), [w[:5] for w in WIDE[:4]] + SMALL_K16)
def test_coarse_masters_are_sound_and_hand_over_to_the_fine_one(
    branches: int, depth: int, devices: int, memory_gib: float, seed: int
) -> None:
    # duals equal across the states of a band still give the certificate: the master with one (link) row for all
    # states proves a bound below the DP's optimum (on these small cases within 1% of it), and handed over to the
    # master with a row per state the bound only grows, to the optimum
    problem = parallel_branches(branches, depth, devices, memory_gib * GIB, seed=seed)
    best, _ = _optimum(problem)
    if math.isinf(best):
        return
    lower = work_lower_bound_s(problem)
    coarse = cb.column_bound_report(problem, lower, best, Budget.starting_now(BUDGET_S), bands=(cb.ALL_STATES,))
    assert best * 0.99 <= coarse.bound <= best * (1 + 1e-9)
    both = cb.column_bound_report(problem, lower, best, Budget.starting_now(BUDGET_S), bands=(cb.ALL_STATES, 1))
    smax = min(devices, problem.microbatches)
    assert [band for band, _ in both.by_band] == [smax, 1]
    first, last = both.by_band[0][1], both.by_band[1][1]
    assert lower < first <= last == both.bound <= best * (1 + 1e-9)
    assert both.bound >= best * (1 - 1e-6)
    # the coarse master hands over once within COARSE_REL_TOL: short of the optimum by at most about that
    assert first >= best * (1 - 2 * cb.COARSE_REL_TOL)


@pytest.mark.parametrize(("branches", "depth", "devices", "memory_gib", "seed"), [(3, 4, 8, 1.0, 6), (3, 4, 16, 0.75, 2)])
def test_state_rows_carry_the_memory_of_the_states_into_the_all_states_master(
    branches: int, depth: int, devices: int, memory_gib: float, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # where memory binds, the master with one (link) row for all states lets every stage take the fewest micro-batches
    # in flight; its (state) rows (the columns that leave a state equal those that enter it) make the states a flow
    # again: without them the bound ends short of the optimum (0.982 and 0.967 of it), with them within the hand-over
    # tolerance of it, and still below it
    problem = parallel_branches(branches, depth, devices, memory_gib * GIB, seed=seed)
    best, _ = _optimum(problem)
    lower = work_lower_bound_s(problem)
    bounds = {}
    for rows in (False, True):
        monkeypatch.setattr(cb, "STATE_ROWS", rows)
        bounds[rows] = cb.column_bound_report(problem, lower, best, Budget.starting_now(BUDGET_S), bands=(cb.ALL_STATES,)).bound
    assert bounds[False] < best * 0.99
    assert best * (1 - 2 * cb.COARSE_REL_TOL) <= bounds[True] <= best * (1 + 1e-9)


def test_a_pool_of_columns_starts_another_search_in_seconds_whatever_its_reference() -> None:
    # the chain's second process hands its master's columns to the master after the heuristics, whose reference (the
    # best plan then) differs: the pool is in seconds, so a column keeps its time, and the second search starts from
    # them (it has them all before pricing) and stays below the optimum
    problem = parallel_branches(3, 4, 16, 0.75 * GIB, seed=2)
    best, _ = _optimum(problem)
    lower = work_lower_bound_s(problem)
    first = cb.column_bound_report(
        problem, lower, 1.5 * best, Budget.starting_now(BUDGET_S), bands=(cb.ALL_STATES,), keep_columns=True
    )
    assert first.pool and len(first.pool) == first.columns
    second = cb.column_bound_report(
        problem, lower, best, Budget.starting_now(BUDGET_S), bands=(cb.ALL_STATES,), columns=first.pool, keep_columns=True
    )
    assert second.columns >= len(first.pool)
    assert lower < second.bound <= best * (1 + 1e-9)
    seconds = {col[:3]: col[3] for col in second.pool}
    for ty, a, e, took, _ in first.pool:  # the same column, the same seconds (or a faster choice found later)
        assert seconds[(ty, a, e)] <= took * (1 + 1e-12)
    assert sum(math.isclose(seconds[col[:3]], col[3], rel_tol=1e-12) for col in first.pool) >= 0.9 * len(first.pool)
    assert cb.column_bound_report(problem, lower, best, Budget.starting_now(BUDGET_S), bands=(cb.ALL_STATES,)).pool == []


def test_a_band_of_states_is_one_row_with_one_dual() -> None:
    # band 2 on k = 4: states 1-2 and 3-4 share a (link) row of each chain's position, and the duals handed to
    # pricing are equal across each band
    master = cb._Master(devices=4, band=2)
    first = cb.StageType(1, 1, 4, True, False)
    mid = cb.StageType(1, 1, 3, False, False)
    last = cb.StageType(2, 1, 2, False, True)
    master.add(first, (0, 0), (1, 1), 0.5, (0, 0))
    master.add(mid, (1, 1), (2, 1), 0.5, (0, 0))
    master.add(last, (2, 1), (3, 3), 0.5, (0, 0))
    assert {key[2] for key in master.links} == {0, 1}  # states 2 and 3 in bands 0 and 1
    master.restrict(1.0)
    assert master.solve(Budget.starting_now(BUDGET_S)) is not None
    _, _, pi = master.duals()
    for h, j in {(h, j) for h, j, _ in pi}:
        assert pi.get((h, j, 1)) == pi.get((h, j, 2))
        assert pi.get((h, j, 3)) == pi.get((h, j, 4))
    master.regroup(1)  # a row per state: the same columns
    assert {key[2] for key in master.links} == {1, 2}  # states 2 and 3: keys (s - 1) // band
    assert len(master.columns) == 3


@pytest.mark.parametrize("threads", [1, 2])
def test_where_the_stage_bound_cannot_run_the_coarse_master_runs_and_the_polisher_goes_on(threads: int) -> None:
    # k = 16: too many stage sequences for the stage bound; the column bound runs the master with one row for all
    # states alone, then the polisher has the rest of its time here; with two threads the polisher also goes on
    # beside the master from the orders' plans (its plan verified by the chain).  Everything proven stays below the
    # DP's optimum, every plan above it.
    from milp_partition.joint import beside
    from milp_partition.joint.problem import JointSolveSettings
    from milp_partition.joint.solve import BESIDE_STARTS, solve_joint
    from milp_partition.joint.stage_bound import sequences

    if threads == 2 and not beside.available():
        pytest.skip("no fork start method here")
    problem = parallel_branches(3, 3, 16, 1.0 * GIB, seed=1)
    assert sequences(problem) is None
    best, _ = _optimum(problem)
    settings = JointSolveSettings(
        time_limit_s=20.0,
        max_ideals=10,
        threads=threads,
        solver="none",
        schedule=JointSchedule().capped(orders=1.0, orders_below_cap=1.0, polish=1.0),
    )
    result = solve_joint(problem, settings)
    notes = result.solver_notes
    assert [band for band, _ in notes["column_bound_bands"]] == [16]  # a share under BANDS_OF_FOUR_FROM_S
    assert notes["column_bound_bands"][0][1] <= best * (1 + 1e-9)
    assert result.bound is not None and result.objective is not None
    assert result.bound <= best * (1 + 1e-9) <= result.objective * (1 + 2e-9)
    names = [h.name for h in result.heuristics]
    stopped = result.stopped_by == "time_limit"  # a loaded machine may spend the limit before the later phases run
    if result.bound < result.objective * (1 - 1e-7) and not stopped:  # not proven by the column bound: the polisher goes on
        assert "polish-rest" in names
        assert best * (1 - 1e-9) <= notes["polish_rest"]["to"] <= notes["polish_rest"]["from"]
    if threads == 2:  # the all-states master ran beside the heuristics first, its columns started the one here
        beside_bound = notes["column_bound_beside"]["bound"]
        assert notes["segment_bound"] <= beside_bound <= best * (1 + 1e-9)
        assert notes["column_bound_beside"]["columns"] > 0 or stopped
        assert "polish-beside" in names
        assert isinstance(notes["polish_beside"]["to"], float)
        assert best * (1 - 1e-9) <= notes["polish_beside"]["to"] <= notes["polish_beside"]["from"]
        # the orders' DP ran a second time with every stage on one device, and the polisher beside started there
        assert "order-dp-one-device" in names
        assert notes["polish_beside"]["one_device"] is True
        assert 1 <= notes["polish_beside"]["starts"] <= BESIDE_STARTS
    else:
        assert "polish-beside" not in names and "polish_beside" not in notes
        assert "order-dp-one-device" not in names


@pytest.mark.parametrize(("time_limit_s", "bands"), [(15.0, (0,)), (60.0, (0, 4)), (600.0, (0, 1))])
def test_where_the_stage_bound_cannot_run_a_longer_share_adds_a_finer_master(
    monkeypatch: pytest.MonkeyPatch, time_limit_s: float, bands: tuple[int, ...]
) -> None:
    # k = 16: the all-states master alone in a short share (the main process polishes after it), then the master
    # with a row per band of four states where the column bound has BANDS_OF_FOUR_FROM_S seconds or more, with a row
    # per state from ROW_PER_STATE_FROM_S (a mock column bound records what the chain asks of it and proves nothing)
    from milp_partition.joint import solve as solve_module
    from milp_partition.joint.problem import JointSolveSettings
    from milp_partition.joint.stage_bound import sequences

    assert cb.ALL_STATES == 0
    problem = parallel_branches(3, 3, 16, 1.0 * GIB, seed=1)
    assert sequences(problem) is None
    asked: list[tuple[tuple[int, ...], float]] = []

    def recording_column_bound(problem, lower, upper, budget, **kw):  # type: ignore[no-untyped-def]
        asked.append((tuple(kw["bands"]), budget.left()))
        return cb.ColumnBoundReport(lower)

    monkeypatch.setattr(solve_module, "column_bound_report", recording_column_bound)
    settings = JointSolveSettings(
        time_limit_s=time_limit_s,
        max_ideals=10,
        solver="none",
        schedule=JointSchedule().capped(orders=1.0, orders_below_cap=1.0, polish=0.0, segment_bound=1 / 3, stage_bound=2 / 3),
    )
    solve_module.solve_joint(problem, settings)
    [(asked_bands, seconds)] = asked
    assert asked_bands == bands
    # the share decides (here far from the thresholds: the mock and the capped heuristics take seconds at most)
    if bands == (0,):
        assert seconds < solve_module.BANDS_OF_FOUR_FROM_S
    elif bands == (0, 4):
        assert solve_module.BANDS_OF_FOUR_FROM_S <= seconds < solve_module.ROW_PER_STATE_FROM_S
    else:
        assert seconds >= solve_module.ROW_PER_STATE_FROM_S


def test_of_two_choices_for_the_same_intervals_the_faster_is_kept() -> None:
    # a column is its type and intervals; pricing at a lower target may find the same intervals with a faster
    # configuration choice: it replaces the slower one and fits there (before, the first one found stayed, out of the
    # LP at the lower target, and the master looked converged where the certificate failed)
    master = cb._Master(devices=1)
    ty = cb.StageType(1, 1, 1, True, True)
    assert master.add(ty, (0,), (3,), 2.0, (0, 0, 0))
    master.restrict(1.0)  # 2.0 > 1 * 1.0: it does not fit
    assert master.vars[0].ub() == 0.0
    assert master.add(ty, (0,), (3,), 0.8, (1, 1, 0))  # the faster choice: it fits now
    assert master.columns[0][3:] == (0.8, (1, 1, 0)) and master.vars[0].ub() == math.inf
    assert not master.add(ty, (0,), (3,), 0.9, (1, 0, 0))  # slower than the one kept
    assert len(master.columns) == 1 and master.columns[0][4] == (1, 1, 0)
    assert master.solve(Budget.starting_now(BUDGET_S)) == pytest.approx(0.0, abs=1e-9)  # the column is a plan


def test_the_one_device_orders_run_only_where_the_polisher_runs_beside_the_column_bound() -> None:
    # past the DP's cap the orders' DP runs a second time, every stage on one device, only for the polisher beside
    # the column bound: two threads, no forced shape, the stage bound cannot run (too many stage sequences)
    from types import SimpleNamespace

    from milp_partition.joint import beside
    from milp_partition.joint.problem import JointSolveSettings
    from milp_partition.joint.solve import JointSteps

    if not beside.available():
        pytest.skip("no fork start method here")
    wide = parallel_branches(3, 3, 16, 1.0 * GIB, seed=1)  # k = 16: the stage bound cannot run
    narrow = parallel_branches(3, 3, 4, 1.0 * GIB, seed=1)  # k = 4: it can

    def runs(problem: JointProblem, threads: int, **caps: float) -> bool:
        steps = JointSteps(JointSolveSettings(threads=threads, schedule=JointSchedule().capped(**caps)))
        return steps._one_device_orders(SimpleNamespace(problem=problem))  # type: ignore[arg-type]

    assert runs(wide, threads=2)
    assert not runs(wide, threads=1)
    assert not runs(narrow, threads=2)
    assert not runs(replace(wide, shape=JointShape(stages=3)), threads=2)
    assert not runs(wide, threads=2, polish=0.0)
    assert not runs(wide, threads=2, column_bound=0.0)


def test_the_one_device_orders_give_plans_of_the_unforced_problem() -> None:
    # the forced shape only restricts the orders' DP: its plans are plans of the problem, every stage on one device
    from milp_partition.heuristics.joint_orders import grouped_order_dp

    from milp_partition.joint.solve import ONE_DEVICE

    problem = parallel_branches(3, 3, 16, 1.0 * GIB, seed=1)
    found: list[tuple[JointPlan, float]] = []
    plan, value = grouped_order_dp(
        replace(problem, shape=ONE_DEVICE), Budget.starting_now(BUDGET_S), (1, 2), tries=3, found=found
    )
    assert plan is not None and found and found[-1] == (plan, value)
    for got, dp_value in found:
        assert all(st.data_parallel == 1 and st.tensor_parallel == 1 for st in got.stages)
        checked = verify_joint(problem, got)
        assert checked.feasible, checked.violations
        assert checked.objective == pytest.approx(dp_value, rel=1e-9)
    assert len(plan.stages) > 1  # k = 16 one-device stages: the plan spreads over several
