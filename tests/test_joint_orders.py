"""The exact DP along topological orders (heuristics/joint_orders.py): valid plans, never better than the optimum."""

from __future__ import annotations

import math
import random

import pytest
from joint_past_the_cap import solved_past_the_ideal_cap
from milp_partition.heuristics.joint_orders import along_order, depth_first_order, order_dp
from test_joint_bruteforce import brute_force, random_problem
from test_joint_io import GIB

from milp_partition.budget import Budget
from milp_partition.joint.dp import joint_data
from milp_partition.joint.generators import parallel_branches
from milp_partition.joint.problem import JointPlan, JointProblem, JointSolveSettings, JointStage
from milp_partition.joint.solve import solve_joint
from milp_partition.verifiers.joint import verify_joint


def _is_topological(problem, order: list[str]) -> bool:
    where = {v: q for q, v in enumerate(order)}
    return sorted(order) == sorted(n.id for n in problem.nodes) and all(where[e.source] < where[e.target] for e in problem.edges)


def test_depth_first_order_finishes_a_branch_before_the_next() -> None:
    problem = parallel_branches(3, 4, 4, GIB, seed=1)
    order = depth_first_order(problem)
    assert _is_topological(problem, order)
    assert order == ["source", *(f"b{b}.{j}" for b in range(3) for j in range(4)), "sink"]
    shuffled = depth_first_order(problem, random.Random(3))
    assert _is_topological(problem, shuffled)
    # the restricted problem's ideals are the order's prefixes
    assert len(joint_data(along_order(problem, order)).ideals) == len(order) + 1


@pytest.mark.parametrize("seed", range(40))
def test_order_dp_plans_are_valid_and_never_beat_brute_force(seed: int) -> None:
    problem = random_problem(seed)
    _valid_and_never_below_brute_force(problem, *order_dp(problem, Budget.starting_now(60.0)))


def _valid_and_never_below_brute_force(problem: JointProblem, plan: JointPlan | None, value: float) -> None:
    """A heuristic's ``(plan, value)``: none (value inf), or a verified plan of that value, never below the optimum."""
    best = brute_force(problem)
    if plan is None:
        assert math.isinf(value)
        return
    rep = verify_joint(problem, plan)
    assert rep.feasible, rep.violations
    assert rep.objective == pytest.approx(value, rel=1e-9, abs=1e-12)
    assert rep.objective >= best * (1 - 1e-9)


def test_order_dp_on_a_wide_graph_is_no_better_than_the_dp() -> None:
    problem = parallel_branches(3, 4, 4, GIB, seed=1)
    optimum = solve_joint(problem, JointSolveSettings(time_limit_s=600.0)).objective
    plan, value = order_dp(problem, Budget.starting_now(60.0))
    assert plan is not None and optimum is not None
    assert verify_joint(problem, plan).feasible
    assert value >= optimum * (1 - 1e-9)


def test_the_chain_runs_order_dp_past_the_ideal_cap() -> None:
    _, result = solved_past_the_ideal_cap()  # the solve the segment and stage bound tests check too
    runs = {run.name: run for run in result.heuristics}
    assert "order-dp" in runs and runs["order-dp"].objective is not None
    assert result.objective is not None and result.objective <= runs["order-dp"].objective


def test_along_groups_chains_each_group_in_order_only() -> None:
    """Two groups of chains: each group's nodes follow the order, the groups interleave freely (more ideals)."""
    from milp_partition.heuristics.joint_orders import along_groups, chain_groups

    problem = parallel_branches(4, 3, 4, GIB, seed=0)
    order = depth_first_order(problem)
    groups = chain_groups(problem, 2, random.Random(1))
    assert sorted(set(groups)) == [0, 1]
    grouped = along_groups(problem, order, groups)
    where = {v: q for q, v in enumerate(order)}
    index = {nd.id: v for v, nd in enumerate(problem.nodes)}
    added = grouped.edges[len(problem.edges) :]
    assert added and all(where[e.source] < where[e.target] and groups[index[e.source]] == groups[index[e.target]] for e in added)
    one = len(joint_data(along_order(problem, order)).ideals)
    assert one == len(order) + 1 < len(joint_data(grouped).ideals) < len(joint_data(problem).ideals)


@pytest.mark.parametrize("seed", range(20))
def test_grouped_order_dp_plans_are_valid_and_never_beat_brute_force(seed: int) -> None:
    from milp_partition.heuristics.joint_orders import grouped_order_dp

    problem = random_problem(seed)
    _valid_and_never_below_brute_force(problem, *grouped_order_dp(problem, Budget.starting_now(60.0), (1, 2, 3), tries=8))


@pytest.mark.parametrize(("branches", "depth", "seed"), [(3, 4, 0), (4, 3, 1), (3, 5, 1)])
def test_two_groups_find_better_plans_than_one_order(branches: int, depth: int, seed: int) -> None:
    """On these wide graphs two groups of chains beat every depth-first order and stay above the optimum."""
    from milp_partition.heuristics.joint_orders import grouped_order_dp

    problem = parallel_branches(branches, depth, 4, GIB, seed=seed)
    _, one = order_dp(problem, Budget.starting_now(60.0))
    plan, two = grouped_order_dp(problem, Budget.starting_now(60.0), (1, 2), tries=20)
    optimum = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
    assert plan is not None and verify_joint(problem, plan).feasible
    assert optimum.objective is not None and two >= optimum.objective * (1 - 1e-9)
    assert two < one * (1 - 1e-9)


@pytest.mark.parametrize("threads", [1, 2])
def test_an_interrupt_in_the_orders_dp_ends_the_solve_with_its_plan(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    # Ctrl-C during the DP along orders: the search it stopped keeps its plan, the interrupt reaches the chain (it
    # used to be swallowed: the orders went on, then the polisher and the bounds), which settles on that plan
    from milp_partition.heuristics import joint_orders

    problem = parallel_branches(3, 4, 4, GIB, seed=1)
    real = joint_orders.search
    calls = []

    def interrupted_second(data, **kwargs):  # type: ignore[no-untyped-def]
        found = real(data, **kwargs)
        calls.append(found.value)
        if len(calls) == 2:
            found.interrupted = True  # as the search reports a KeyboardInterrupt it caught
        return found

    monkeypatch.setattr(joint_orders, "search", interrupted_second)
    settings = JointSolveSettings(time_limit_s=60.0, max_ideals=10, solver="none", threads=threads)
    result = solve_joint(problem, settings)
    assert len(calls) == 2
    assert result.stopped_by == "interrupt"
    run = next(h for h in result.heuristics if h.name == "order-dp")
    assert "interrupted" in run.message
    assert not any(h.name in ("polish", "segment-bound", "column-bound") for h in result.heuristics)
    assert result.objective is not None and result.objective <= min(calls) * (1 + 1e-9)
    plan = JointPlan(
        tuple(JointStage(tuple(st["nodes"]), st["data_parallel"], st["tensor_parallel"], st["configs"]) for st in result.stages)
    )
    assert verify_joint(problem, plan).objective == pytest.approx(result.objective, rel=1e-12)
