"""The joint problem's slot MILP (:mod:`milp_partition.formulations.joint`) against brute force and the DP.

Three kinds of check:

- every plan the independent verifier accepts satisfies every row of the model at the values
  :func:`~milp_partition.formulations.joint.values_of` gives it, with ``T`` at the verifier's
  value: the model cuts no plan off, so its bound is a bound;
- CP-SAT and CBC reach the brute-force optimum (or prove infeasibility) on tiny random instances;
- the chain runs the model when the DP cannot (more ideals than its cap), and on a shared instance.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from milp_partition.formulations import joint as formulation

from milp_partition.backends.model import Model, Sense
from milp_partition.io.piper import read_joint
from milp_partition.joint.dp import joint_data, search
from milp_partition.joint.generators import parallel_branches
from milp_partition.joint.problem import JointSolveSettings
from milp_partition.joint.schedule import JointSchedule
from milp_partition.joint.solve import solve_joint
from milp_partition.verifiers.joint import verify_joint
from tests.test_joint_bruteforce import all_plans, brute_force, random_problem

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "joint"

#: the slot formulation alone past the cap: no segment, stage or column bound
NO_BOUNDS = JointSchedule().capped(segment_bound=0, stage_bound=0, column_bound=0)


def _violated_rows(model: Model, values: dict[int, float]) -> list[str]:
    bad = []
    for row in model.constraints:
        lhs = math.fsum(coef * values[i] for i, coef in row.terms.items())
        slack = 1e-9 * max(1.0, abs(row.rhs), math.fsum(abs(c * values[i]) for i, c in row.terms.items()))
        if (row.sense is Sense.LE and lhs > row.rhs + slack) or (row.sense is Sense.GE and lhs < row.rhs - slack):
            bad.append(f"{row.name}: {lhs} {row.sense.value} {row.rhs}")
        if row.sense is Sense.EQ and abs(lhs - row.rhs) > slack:
            bad.append(f"{row.name}: {lhs} == {row.rhs}")
    for var in model.variables:
        if not var.lb - 1e-9 <= values[var.index] <= var.ub + 1e-9:
            bad.append(f"{var.name} = {values[var.index]} outside [{var.lb}, {var.ub}]")
    return bad


@pytest.mark.parametrize("seed", range(60))
def test_every_verified_plan_satisfies_the_model(seed: int) -> None:
    problem = random_problem(seed)
    jm = formulation.build(problem)
    checked = 0
    for plan in all_plans(problem):
        rep = verify_joint(problem, plan)
        if not rep.feasible:
            continue
        values = formulation.values_of(jm, plan, rep.objective)
        assert _violated_rows(jm.model, values) == [], plan
        assert formulation.decode(jm, [values[i] for i in range(len(jm.model.variables))]) == plan
        checked += 1
        if checked >= 40:
            break


@pytest.mark.parametrize("solver", ["cpsat", "cbc"])
@pytest.mark.parametrize("seed", range(0, 40, 2))
def test_milp_matches_brute_force(seed: int, solver: str) -> None:
    problem = random_problem(seed)
    expected = brute_force(problem)
    result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0, method="milp", solver=solver, baselines=False))
    assert result.solver == f"joint-milp/{solver}"
    if math.isinf(expected):
        assert result.status == "infeasible", result.message
        return
    assert result.status == "optimal", (result.message, result.discarded)
    assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert result.bound is not None and result.bound <= result.objective


def test_the_chain_falls_back_to_the_milp_past_the_ideal_cap() -> None:
    problem = next(p for p in map(random_problem, range(100)) if len(p.nodes) == 4 and math.isfinite(brute_force(p)))
    expected = brute_force(problem)
    # no time for the bounds (the column or stage bound alone proves some of these): the MILP must prove it
    result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0, max_ideals=3, schedule=NO_BOUNDS))
    assert "too_many_ideals" in result.solver_notes
    assert result.solver == "joint-milp/cpsat"
    assert result.status == "optimal"
    assert result.objective == pytest.approx(expected, rel=1e-9)
    dp = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
    assert dp.solver == "joint-dp" and dp.objective == pytest.approx(expected, rel=1e-9)


def test_a_model_over_the_cap_is_refused_with_a_note() -> None:
    problem = random_problem(3)
    with pytest.raises(formulation.ModelTooLarge, match="binaries"):
        formulation.build(problem, max_binaries=1)


def test_bert_on_eight_devices_matches_piper() -> None:
    # bert32a100.json, k = 8, 1 GiB: infeasible for Piper and for the DP; CP-SAT proves it on the model in
    # seconds (CBC takes minutes, so it is left to the tiny instances above)
    problem = read_joint(SHARED / "bert32a100.json", devices=8, memory_bytes=2**30, bandwidth_bytes_per_s=25 * 2**30)
    result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0, method="milp", solver="cpsat"))
    assert result.status == "infeasible", result.message


def test_bert_bound_is_below_the_proven_optimum() -> None:
    # k = 8, 8 GiB: the DP proves 0.16585575 (Piper's value); the model must never bound above it.  Checked at any
    # machine speed: the DP's optimal plan satisfies every row of the model at T = its value (so no bound of the model,
    # however far its search got, is above the optimum), and at T 1% lower it does not (the time rows bind there: the
    # check is not vacuous).  A CP-SAT run stopped after seconds gets no further than the work bound here, which alone
    # would leave the bound's assertion below trivially true.
    problem = read_joint(SHARED / "bert32a100.json", devices=8, memory_bytes=8 * 2**30, bandwidth_bytes_per_s=25 * 2**30)
    found = search(joint_data(problem))  # no time limit: the DP proves it in a fraction of a second
    assert found.optimal and found.plan is not None and found.value == pytest.approx(0.16585575, rel=1e-9)
    rep = verify_joint(problem, found.plan)
    assert rep.feasible and rep.objective == pytest.approx(0.16585575, rel=1e-9)
    jm = formulation.build(problem)
    assert _violated_rows(jm.model, formulation.values_of(jm, found.plan, rep.objective)) == []
    assert _violated_rows(jm.model, formulation.values_of(jm, found.plan, rep.objective * 0.99)) != []
    # the whole chain on the model, stopped early: a verified plan no better than the optimum, a bound no higher
    result = solve_joint(problem, JointSolveSettings(time_limit_s=2.0, method="milp"))
    assert result.objective is not None and result.objective >= 0.16585575 * (1 - 1e-9)
    # (on a loaded machine 2 s may end before the model is built: then no bound is claimed, which is sound)
    assert result.bound is None or result.bound <= 0.16585575 * (1 + 1e-9)


@pytest.mark.parametrize(("branches", "depth", "devices", "memory_gib"), [(2, 3, 2, 1.0), (2, 3, 4, 1.0), (3, 2, 4, 0.5)])
def test_wide_graph_past_the_cap_gets_the_dp_optimum(branches: int, depth: int, devices: int, memory_gib: float) -> None:
    problem = parallel_branches(branches, depth, devices, memory_gib * 2**30, seed=3)
    fallback = solve_joint(problem, JointSolveSettings(time_limit_s=600.0, max_ideals=10, schedule=NO_BOUNDS))
    wide = solve_joint(problem, JointSolveSettings(time_limit_s=600.0, max_ideals=10))  # with the bounds
    dp = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
    assert fallback.solver == "joint-milp/cpsat" and dp.solver == "joint-dp"
    assert wide.solver in ("joint-wide", "joint-milp/cpsat")  # proven by the column or stage bound, or by the MILP after them
    assert fallback.status == wide.status == dp.status == "optimal"
    assert fallback.objective == pytest.approx(dp.objective, rel=1e-9)
    assert wide.objective == pytest.approx(dp.objective, rel=1e-9)
