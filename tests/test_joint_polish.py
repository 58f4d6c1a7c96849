"""The plan polisher (heuristics/joint_polish.py): verified plans, never worse than the input, never below the optimum."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from joint_past_the_cap import solved_past_the_ideal_cap
from milp_partition.heuristics import joint_polish
from milp_partition.heuristics.joint_polish import polish, polish_starts
from test_joint_bruteforce import all_plans, brute_force, random_problem
from test_joint_io import GIB

from milp_partition.budget import Budget
from milp_partition.joint.generators import parallel_branches
from milp_partition.joint.problem import JointPlan, JointProblem, JointShape, JointSolveSettings, JointStage
from milp_partition.joint.solve import solve_joint
from milp_partition.verifiers.joint import verify_joint


def _worst_plan(problem: JointProblem) -> JointPlan | None:
    """The feasible plan of the largest objective (the brute force's plans)."""
    worst: tuple[float, JointPlan | None] = (-math.inf, None)
    for plan in all_plans(problem):
        rep = verify_joint(problem, plan)
        if rep.feasible and rep.objective > worst[0]:
            worst = (rep.objective, plan)
    return worst[1]


def _check(problem: JointProblem, start: JointPlan, optimum: float) -> float:
    """Polish ``start``: a verified plan, its value the verifier's, no worse than ``start``, no better than the optimum."""
    before = verify_joint(problem, start).objective
    plan, value = polish(problem, start, Budget.starting_now(60.0))
    rep = verify_joint(problem, plan)
    assert rep.feasible, rep.violations
    assert rep.objective == value
    assert value <= before
    assert value >= optimum * (1 - 1e-9)
    return value


#: the first 40 seeds whose tiny random problem has a feasible plan (the others have nothing to polish)
SEEDS = [seed for seed in range(100) if _worst_plan(random_problem(seed)) is not None][:40]


def test_forty_tiny_problems_have_a_plan() -> None:
    assert len(SEEDS) == 40


@pytest.mark.parametrize("seed", SEEDS)
def test_polishing_the_worst_plan_of_a_tiny_problem(seed: int) -> None:
    problem = random_problem(seed)
    start = _worst_plan(problem)
    assert start is not None
    _check(problem, start, brute_force(problem))


def _one_stage(problem: JointProblem) -> JointPlan:
    """Every node in one stage on one device, each in its least-memory configuration (a deliberately bad plan)."""
    configs = {n.id: min(n.configs[1], key=lambda c: c.activation_bytes * 64 + c.fixed_bytes).id for n in problem.nodes}
    return JointPlan((JointStage(tuple(n.id for n in problem.nodes), 1, 1, configs),))


def test_a_bad_plan_of_a_wide_graph_improves_and_stays_above_the_exact_dp() -> None:
    problem = parallel_branches(3, 3, 4, 4 * GIB, seed=1)
    start = _one_stage(problem)
    assert verify_joint(problem, start).feasible
    optimum = solve_joint(problem, JointSolveSettings(time_limit_s=120.0)).objective
    assert optimum is not None
    value = _check(problem, start, optimum)
    assert value < verify_joint(problem, start).objective * 0.5  # four devices instead of one, at least


def test_an_invalid_plan_is_refused_with_the_verifiers_reason() -> None:
    problem = parallel_branches(2, 2, 2, GIB, seed=0)
    start = _one_stage(problem)
    missing = JointPlan(
        (JointStage(start.stages[0].nodes[1:], 1, 1, {v: c for v, c in start.stages[0].configs.items() if v != "source"}),)
    )
    with pytest.raises(ValueError, match="nodes in no stage"):
        polish(problem, missing, Budget.starting_now(10.0))


def test_a_spent_budget_hands_back_a_verified_plan_no_worse() -> None:
    problem = parallel_branches(3, 3, 4, 4 * GIB, seed=1)
    start = _one_stage(problem)
    plan, value = polish(problem, start, Budget.starting_now(0.0))
    assert verify_joint(problem, plan).feasible
    assert value <= verify_joint(problem, start).objective


def test_the_wide_chain_polishes_its_best_plan() -> None:
    _, result = solved_past_the_ideal_cap()
    notes = result.solver_notes["polish"]
    assert notes["to"] <= notes["from"]
    assert result.objective is not None and result.objective <= notes["to"]


def test_a_forced_number_of_stages_is_kept() -> None:
    problem = replace(parallel_branches(3, 3, 4, 4 * GIB, seed=1), shape=JointShape(stages=2))
    one = _one_stage(problem).stages[0]
    first = ("source", "b0.0", "b0.1", "b0.2")
    start = JointPlan(
        tuple(
            JointStage(nodes, 1, 1, {v: one.configs[v] for v in nodes})
            for nodes in (first, tuple(v for v in one.nodes if v not in first))
        )
    )
    assert verify_joint(problem, start).feasible
    plan, value = polish(problem, start, Budget.starting_now(60.0))
    rep = verify_joint(problem, plan)
    assert rep.feasible and len(plan.stages) == 2
    assert value < verify_joint(problem, start).objective


def test_several_starts_give_the_best_of_their_polished_plans() -> None:
    problem = parallel_branches(3, 3, 4, 4 * GIB, seed=1)
    bad = _one_stage(problem)
    good, good_value = polish(problem, bad, Budget.starting_now(60.0))
    plan, value = polish_starts(problem, [bad, good], Budget.starting_now(60.0))
    assert verify_joint(problem, plan).objective == value <= good_value
    with pytest.raises(ValueError, match="at least one plan"):
        polish_starts(problem, [], Budget.starting_now(1.0))


def _reorder_case() -> tuple[JointProblem, joint_polish._Model, list[joint_polish.Stage]]:
    """Four branches of two at 0.75 GiB, five stages; the second (d = 1) holds a whole branch early, where many
    micro-batches are in flight."""
    problem = parallel_branches(4, 2, 8, 0.75 * GIB, seed=2)
    model = joint_polish._Model(problem)
    at = {v: q for q, v in enumerate(model.ids)}
    groups = [("source", "b0.0"), ("b1.0", "b1.1"), ("b2.0",), ("b0.1", "b3.0"), ("b2.1", "b3.1", "sink")]
    degrees = [(2, 1), (1, 1), (1, 1), (1, 1), (2, 1)]
    return problem, model, [(frozenset(at[v] for v in g), d, t) for g, (d, t) in zip(groups, degrees)]


def test_a_stage_moves_to_every_place_in_the_pipeline_that_keeps_the_edges_forward() -> None:
    # the reorder neighbourhood: one stage, its nodes and degrees, moved elsewhere in the pipeline; exactly the moves
    # whose plan has no edge going back (the verifier's check), each once or more
    problem, model, stages = _reorder_case()
    search = joint_polish._Search(model, stages, Budget.starting_now(60.0))
    got = {tuple(moved) for moved in search.reorders()}
    want = set()
    for i in range(len(stages)):
        for j in range(len(stages)):
            moved = list(stages)
            moved.insert(j, moved.pop(i))
            plan = JointPlan(
                tuple(
                    JointStage(
                        tuple(model.ids[v] for v in nodes), d, t, {model.ids[v]: problem.nodes[v].configs[t][0].id for v in nodes}
                    )
                    for nodes, d, t in moved
                )
            )
            if i != j and not any("back to stage" in x for x in verify_joint(problem, plan).violations):
                want.add(tuple(moved))
    assert len(want) >= 2 and got == want


def test_moving_a_stage_later_lowers_its_memory_and_its_time() -> None:
    # the second stage (d = 1, six micro-batches in flight) needs recomputation to fit 0.75 GiB: moved later, fewer
    # micro-batches are in flight there and its time drops; the plan is verified with the times the search computed
    problem, model, stages = _reorder_case()
    search = joint_polish._Search(model, stages, Budget.starting_now(60.0))
    before, slow = search.key, search.times[1]
    assert search.first_improvement(search.reorders())
    assert search.key < before and set(search.stages) == set(stages)
    moved = search.stages.index(stages[1])
    assert moved > 1 and search.times[moved] < slow
    report = verify_joint(problem, model.plan(search.stages))
    assert report.feasible
    assert [st.time_per_sample_s for st in report.stages] == pytest.approx(search.times, rel=1e-9)
