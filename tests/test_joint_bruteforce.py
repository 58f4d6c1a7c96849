"""The exact joint DP against brute force on tiny random instances (every plan enumerated), and the verifier."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from milp_partition.joint.knapsack import ENUMERATE_MAX, cost_bounds, min_cost_enumerate, min_cost_exact, min_cost_greedy
from milp_partition.joint.problem import (
    JointConfig,
    JointEdge,
    JointNode,
    JointPlan,
    JointProblem,
    JointSolveSettings,
    JointStage,
    joint_cluster,
)
from milp_partition.joint.solve import solve_joint
from milp_partition.verifiers.joint import verify_joint


def random_problem(seed: int) -> JointProblem:
    rng = random.Random(seed)
    n = rng.randint(1, 4)
    degrees = [1] if rng.random() < 0.5 else [1, 2]
    ids = [str(v) for v in range(n)]
    edges = []
    for v in range(1, n):
        for u in range(v):
            if rng.random() < 0.5:
                edges.append(JointEdge(ids[u], ids[v], float(rng.randint(0, 4))))
    preds = {v: [e.source for e in edges if e.target == v] for v in ids}
    succs = {v: [e.target for e in edges if e.source == v] for v in ids}
    nodes = []
    same_w = rng.random() < 0.5  # the DP's d-independent knapsack applies when every option has the same w
    for v in ids:
        w_node = float(rng.randint(0, 3))
        configs = {}
        for t in degrees:
            cfgs = []
            for j in range(rng.randint(1, 2)):
                cfgs.append(
                    JointConfig(
                        id=f"c{j}",
                        time_per_sample_s=float(rng.randint(1, 8)) / t,
                        parameter_bytes=w_node if same_w else float(rng.randint(0, 3)),
                        activation_bytes=float(rng.randint(0, 3)),
                        fixed_bytes=float(rng.randint(0, 3)),
                        sync_fw_bytes={u: float(rng.randint(0, 2) * (t - 1)) for u in preds[v]},
                        sync_bw_bytes={u: float(rng.randint(0, 2) * (t - 1)) for u in succs[v]},
                    )
                )
            configs[t] = tuple(cfgs)
        nodes.append(JointNode(v, f"n{v}", configs))
    cluster = joint_cluster(
        devices=rng.randint(1, 4),
        memory_bytes=float(rng.randint(2, 14)),
        bandwidth_bytes_per_s=float(rng.choice([1, 2, 4])),
    )
    return JointProblem(tuple(nodes), tuple(edges), cluster, rng.choice([1, 2, 4, 6]), source=f"random seed {seed}")


def all_plans(problem: JointProblem):
    """Every plan: ordered partitions into stages that respect the edges, then every d, t and configuration."""
    ids = [n.id for n in problem.nodes]
    k, N = problem.cluster.device_count, problem.microbatches
    for stages in range(1, len(ids) + 1):
        for labels in itertools.product(range(stages), repeat=len(ids)):
            if set(labels) != set(range(stages)):
                continue
            where = dict(zip(ids, labels))
            if any(where[e.source] > where[e.target] for e in problem.edges):
                continue
            groups = [tuple(v for v in ids if where[v] == q) for q in range(stages)]
            degree_choices = [(d, t) for d in range(1, k + 1) if N % d == 0 for t in problem.degrees]
            for degs in itertools.product(degree_choices, repeat=stages):
                if sum(d * t for d, t in degs) > k:
                    continue
                per_stage = []
                for g, (_, t) in zip(groups, degs):
                    options = [[c.id for c in problem.node(v).configs[t]] for v in g]
                    per_stage.append([dict(zip(g, pick)) for pick in itertools.product(*options)])
                for cfgs in itertools.product(*per_stage):
                    yield JointPlan(tuple(JointStage(g, d, t, c) for g, (d, t), c in zip(groups, degs, cfgs)))


def brute_force(problem: JointProblem) -> float:
    best = math.inf
    for plan in all_plans(problem):
        rep = verify_joint(problem, plan)
        if rep.feasible:
            best = min(best, rep.objective)
    return best


@pytest.mark.parametrize("seed", range(200))
def test_exact_solver_matches_brute_force(seed: int) -> None:
    problem = random_problem(seed)
    expected = brute_force(problem)
    result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
    if math.isinf(expected):
        assert result.status == "infeasible"
        assert result.objective is None
        return
    assert result.status == "optimal", result.message
    assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert result.bound is not None and result.bound <= result.objective
    # every baseline that found a plan is no better than the optimum
    for run in result.heuristics:
        if run.objective is not None:
            assert run.objective >= expected * (1 - 1e-9)


def test_knapsack_exact_against_enumeration() -> None:
    rng = np.random.default_rng(1)
    for _ in range(400):
        n, o = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        cost = rng.integers(1, 6, (n, o)).astype(float)
        mem = rng.integers(1, 6, (n, o)).astype(float)
        if rng.random() < 0.5:  # identical nodes form groups
            cost[1:], mem[1:] = cost[0], mem[0]
        cap = float(rng.integers(n, 5 * n))
        best = math.inf
        for pick in itertools.product(range(o), repeat=n):
            if sum(mem[v, pick[v]] for v in range(n)) <= cap:
                best = min(best, sum(cost[v, pick[v]] for v in range(n)))
        value, choice = min_cost_exact(cost, mem, cap, choices=True)
        assert value == pytest.approx(best) if math.isfinite(best) else math.isinf(value)
        if choice is not None:
            assert sum(mem[v, choice[v]] for v in range(n)) <= cap
            assert sum(cost[v, choice[v]] for v in range(n)) == pytest.approx(value)
        greedy, _ = min_cost_greedy(cost, mem, cap)
        assert greedy >= best - 1e-9


def test_knapsack_by_enumeration_against_brute_force_and_the_pareto_dp() -> None:
    """The polisher's enumerating knapsack: the least cost (brute force), a choice that has it, the Pareto DP's value;
    ``None`` where the free nodes have more than ENUMERATE_MAX choices (the caller falls back to the DP)."""
    rng = np.random.default_rng(5)
    answered = 0
    for _ in range(400):
        n, o = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        cost = rng.integers(1, 9, (n, o)).astype(float)
        mem = rng.integers(1, 9, (n, o)).astype(float)
        if rng.random() < 0.3:  # an option a node does not have
            v, j = int(rng.integers(0, n)), int(rng.integers(0, o))
            if o > 1:
                cost[v, j] = mem[v, j] = math.inf
        cap = float(rng.integers(n, 6 * n))
        best = math.inf
        for pick in itertools.product(range(o), repeat=n):
            if sum(mem[v, pick[v]] for v in range(n)) <= cap:
                best = min(best, sum(cost[v, pick[v]] for v in range(n)))
        got = min_cost_enumerate(cost, mem, cap)
        assert got is not None  # at most 3 ** 6 choices: enumerated
        value, choice = got
        assert value == pytest.approx(best) if math.isfinite(best) else (math.isinf(value) and choice is None)
        if choice is not None:
            answered += 1
            assert sum(mem[v, choice[v]] for v in range(n)) <= cap
            assert sum(cost[v, choice[v]] for v in range(n)) == pytest.approx(value)
            assert value == pytest.approx(min_cost_exact(cost, mem, cap)[0], rel=1e-12)
    assert answered > 200
    # twelve free nodes with two options each: 4,096 choices, more than ENUMERATE_MAX
    cost = np.column_stack([np.ones(12), np.full(12, 2.0)])
    mem = np.column_stack([np.full(12, 2.0), np.ones(12)])
    assert 2**12 > ENUMERATE_MAX and min_cost_enumerate(cost, mem, 18.0) is None
    # eleven: 2,048 choices, enumerated; at least four must take the small option (22 - 4 = 18 bytes)
    got = min_cost_enumerate(cost[:11], mem[:11], 18.0)
    assert got is not None and got[0] == 15.0 and got[1] is not None and sum(got[1]) == 4


def test_greedy_knapsack_can_lose() -> None:
    """Best ratio first is not exact: one big upgrade beats two small ones of better ratio."""
    cost = np.array([[10.0, 0.0], [2.0, 0.0], [2.0, 0.0]])  # option 1 saves 10, 2, 2 seconds
    mem = np.array([[0.0, 10.0], [0.0, 1.0], [0.0, 1.0]])  # for 10, 1, 1 bytes
    assert min_cost_exact(cost, mem, 10.0)[0] == 4.0
    assert min_cost_greedy(cost, mem, 10.0)[0] == 10.0


def _capacity_dp(cost: np.ndarray, mem: np.ndarray, cap: int) -> float:
    """Textbook multiple-choice knapsack over integer memory: best[m] = least cost using at most m bytes."""
    best = np.zeros(cap + 1)
    for v in range(cost.shape[0]):
        new = np.full(cap + 1, math.inf)
        for j in range(cost.shape[1]):
            m = int(mem[v, j])
            if m <= cap:
                new[m:] = np.minimum(new[m:], best[: cap + 1 - m] + cost[v, j])
        best = new
    return float(best[cap])


def test_knapsack_exact_on_larger_instances() -> None:
    """Forty distinct nodes (the frontier and its LP-bound pruning at work) against the capacity DP."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        n, o = 40, int(rng.integers(2, 4))
        cost = rng.random((n, o)) * 10
        mem = rng.integers(0, 30, (n, o)).astype(float)
        cap = int(mem.min(axis=1).sum() + rng.integers(0, 200))
        expected = _capacity_dp(cost, mem, cap)
        value, choice = min_cost_exact(cost, mem, float(cap), choices=True)
        assert value == pytest.approx(expected, rel=1e-12)
        assert choice is not None and sum(mem[v, choice[v]] for v in range(n)) <= cap


def test_cost_bounds_bracket_the_exact_value() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 30))
        cost = rng.random((n, 2)) * 10
        mem = rng.integers(0, 30, (n, 2)).astype(float)
        cap = float(mem.min(axis=1).sum() + rng.integers(-5, 200))
        exact = min_cost_exact(cost, mem, cap)[0]
        low, up = cost_bounds(cost, mem, cap)
        if math.isinf(exact):
            assert math.isinf(low)
        else:
            assert low <= exact + 1e-9 and exact <= up + 1e-9


def repeated_chain(seed: int, n: int = 5, edge_bytes: float | None = None) -> JointProblem:
    """A chain of ``n`` identical layers (two configurations each) between a distinct first and last node."""
    rng = random.Random(seed)
    layer = (
        JointConfig("keep", float(rng.randint(2, 6)), 1.0, float(rng.randint(1, 3)), 0.0),
        JointConfig("recompute", float(rng.randint(7, 9)), 1.0, 0.0, 0.0),
    )
    nodes = [JointNode("in", "embed", {1: (JointConfig("c0", 1.0, 1.0, 1.0, 0.0),)})]
    nodes += [JointNode(f"l{q}", "layer", {1: layer}) for q in range(n)]
    nodes.append(JointNode("out", "head", {1: (JointConfig("c0", 2.0, 1.0, 1.0, 0.0),)}))
    ids = [nd.id for nd in nodes]
    edges = tuple(
        JointEdge(u, v, float(rng.randint(1, 3)) if edge_bytes is None else edge_bytes) for u, v in itertools.pairwise(ids)
    )
    cluster = joint_cluster(devices=rng.randint(2, 4), memory_bytes=float(rng.randint(6, 14)), bandwidth_bytes_per_s=1.0)
    return JointProblem(tuple(nodes), edges, cluster, 4, source=f"repeated chain {seed}")


def test_equal_stages_share_one_table_and_keep_their_own_nodes() -> None:
    from milp_partition.joint.dp import JointDP, joint_data

    problem = repeated_chain(0, n=6, edge_bytes=2.0)
    data = joint_data(problem)
    dp = JointDP(data)
    by_set = {frozenset(data.ids[v] for v in range(len(data.ids)) if data.member[i, v]): i for i in range(len(data.ideals))}

    def ideal(*names: str) -> int:
        return by_set[frozenset(names)]

    prefix = ["in", "l0", "l1", "l2", "l3", "l4", "l5", "out"]
    # stages {l1, l2} and {l3, l4}: interior layers with equal boundary edges have the same rows
    i1, j1 = ideal(*prefix[:4]), ideal(*prefix[:2])
    i2, j2 = ideal(*prefix[:6]), ideal(*prefix[:4])
    a = dp.stage_tables(i1, np.array([j1]), 1)[0]
    b = dp.stage_tables(i2, np.array([j2]), 1)[0]
    assert a is b
    # with other bytes on one boundary edge the rows differ: no sharing
    other = JointDP(joint_data(repeated_chain(0, n=6)))  # its edges l0->l1 (3) and l2->l3 (2) differ
    assert other.stage_tables(i1, np.array([j1]), 1)[0] is not other.stage_tables(i2, np.array([j2]), 1)[0]
    # a stage with the first node has other rows: never shared with an interior one
    c = dp.stage_tables(ideal(*prefix[:2]), np.array([0]), 1)[0]
    assert c is not a
    # table() gives each stage its own nodes, with the caches of its content
    own = dp.table(i2, j2, 1)
    assert [data.ids[v] for v in own.nodes] == ["l3", "l4"]
    assert own.values is b.values
    # batched rows equal the rows computed one stage at a time, bit for bit
    cand = np.array([ideal(*prefix[:q]) if q else 0 for q in range(1, 6)])
    _, p_all, w_all = dp._rows(ideal(*prefix[:6]), cand, 1)
    for r, j in enumerate(cand.tolist()):
        _, p_one, w_one = dp._rows(ideal(*prefix[:6]), np.array([j]), 1)
        assert np.array_equal(p_all[r], p_one[0]) and np.array_equal(w_all[r], w_one[0])


@pytest.mark.parametrize("seed", range(6))
def test_repeated_layers_match_brute_force(seed: int) -> None:
    """Repeated layers make many stages share one table: the optimum must not change."""
    problem = repeated_chain(seed, n=4)
    expected = brute_force(problem)
    result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
    if math.isinf(expected):
        assert result.status == "infeasible"
        return
    assert result.status == "optimal", result.message
    assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_interrupt_mid_search_keeps_the_plan_and_the_proven_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (SIGTERM) during the exact search: the result keeps the best verified plan and the bound proven so far."""
    from milp_partition.joint import dp as joint_dp

    problem = repeated_chain(3, n=4)
    full = solve_joint(problem, JointSolveSettings(time_limit_s=600.0, baselines=False))
    assert full.status == "optimal"
    from milp_partition.joint import native

    calls = {"n": 0}

    def stop_on_third(real):  # type: ignore[no-untyped-def]
        def feasible(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt
            return real(self, *args, **kwargs)

        return feasible

    # the numpy pass and the C pass (whichever the search runs)
    monkeypatch.setattr(joint_dp.JointDP, "feasible", stop_on_third(joint_dp.JointDP.feasible))
    monkeypatch.setattr(native.NativeJointDP, "feasible", stop_on_third(native.NativeJointDP.feasible))
    result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0, baselines=False))
    assert result.stopped_by == "interrupt"
    assert "interrupted" in result.message and "time limit" not in result.message
    assert result.objective is not None and result.bound is not None
    assert result.bound <= full.objective * (1 + 1e-9) <= result.objective * (1 + 1e-9)
    assert result.bound > 0  # the passes before the interrupt proved something


def repeated_diamonds(seed: int) -> JointProblem:
    """Blocks ``x_q, y_q -> z_q`` repeated (a diamond per block), each node on degrees 1 and 2 with two configurations."""
    rng = random.Random(seed)
    blocks = rng.randint(3, 5)
    kinds = {}
    for kind in ("x", "y", "z"):
        base = float(rng.randint(2, 6))
        kinds[kind] = {
            t: (
                JointConfig(
                    "keep", base / t + rng.choice([0.0, 0.5]) * (t - 1), float(rng.randint(0, 2)), float(rng.randint(1, 3)), 0.0
                ),
                JointConfig("recompute", base * 1.5 / t, float(rng.randint(0, 2)), 0.0, float(rng.randint(0, 1))),
            )
            for t in (1, 2)
        }
    nodes = [JointNode("z0", "z", kinds["z"])]
    edges = []
    for q in range(1, blocks + 1):
        nodes += [JointNode(f"x{q}", "x", kinds["x"]), JointNode(f"y{q}", "y", kinds["y"]), JointNode(f"z{q}", "z", kinds["z"])]
        for u, v in ((f"z{q - 1}", f"x{q}"), (f"z{q - 1}", f"y{q}"), (f"x{q}", f"z{q}"), (f"y{q}", f"z{q}")):
            edges.append(JointEdge(u, v, float(rng.choice([1, 2]))))
    cluster = joint_cluster(
        devices=rng.randint(2, 8),
        memory_bytes=float(rng.randint(8, 30)),
        bandwidth_bytes_per_s=float(rng.choice([1, 4])),
    )
    return JointProblem(tuple(nodes), tuple(edges), cluster, rng.choice([4, 8]), source=f"repeated diamonds {seed}")


@pytest.mark.parametrize("seed", range(12))
def test_shared_tables_change_nothing(seed: int) -> None:
    """The DP with shared stage tables proves the same optimum (or infeasibility) as with one table per stage."""
    from milp_partition.joint.dp import joint_data, search

    data = joint_data(repeated_diamonds(seed))
    shared = search(data)
    alone = search(data, share_tables=False)
    assert shared.infeasible == alone.infeasible
    assert shared.optimal == alone.optimal == (not shared.infeasible)
    if not shared.infeasible:
        assert shared.value == pytest.approx(alone.value, rel=1e-12)
        assert shared.bound == pytest.approx(alone.bound, rel=1e-12)
        rep = verify_joint(data.problem, shared.plan)
        assert rep.feasible and rep.objective == pytest.approx(shared.value, rel=1e-9)
