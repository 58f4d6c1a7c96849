"""A forced plan shape (``--stages``, ``--data-parallel``): the DP's optimum within the shape equals brute force
over the plans of that shape, and the verifier rejects plans of any other shape."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from milp_partition.joint.problem import JointPlan, JointShape, JointSolveSettings, JointStage
from milp_partition.joint.solve import solve_joint
from milp_partition.verifiers.joint import verify_joint
from tests.test_joint_bruteforce import all_plans, random_problem


def _shaped(seed: int) -> tuple:
    problem = random_problem(seed)
    rng = random.Random(seed + 1000)
    stages = rng.choice([None, 1, 2, 3])
    dp = rng.choice([None, 1, 2])
    tp = rng.choice([None, None, 1, 2])
    if stages is None and dp is None:
        stages = 2
    return replace(problem, shape=JointShape(stages, dp, tp))


@pytest.mark.parametrize("seed", range(120))
def test_forced_shape_matches_brute_force(seed: int) -> None:
    problem = _shaped(seed)
    shape = problem.shape
    assert shape is not None
    expected = math.inf
    for plan in all_plans(problem):
        rep = verify_joint(problem, plan)
        if rep.feasible:
            assert shape.stages is None or len(plan.stages) == shape.stages
            assert shape.data_parallel is None or all(st.data_parallel == shape.data_parallel for st in plan.stages)
            assert shape.tensor_parallel is None or all(st.tensor_parallel == shape.tensor_parallel for st in plan.stages)
            expected = min(expected, rep.objective)
    result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
    if math.isinf(expected):
        assert result.status == "infeasible", (result.status, result.message)
        return
    assert result.status == "optimal", result.message
    assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert shape.stages is None or len(result.stages) == shape.stages
    assert shape.data_parallel is None or all(st["data_parallel"] == shape.data_parallel for st in result.stages)


def test_verifier_rejects_another_shape() -> None:
    problem = random_problem(3)
    ids = tuple(n.id for n in problem.nodes)
    plan = JointPlan((JointStage(ids, 1, 1, {v: problem.node(v).configs[1][0].id for v in ids}),))
    rep = verify_joint(replace(problem, shape=JointShape(stages=2)), plan)
    assert not rep.feasible and any("forced shape has 2" in v for v in rep.violations)
    rep = verify_joint(replace(problem, shape=JointShape(data_parallel=2)), plan)
    assert not rep.feasible and any("data-parallel degrees [1]" in v for v in rep.violations)


def test_shape_rejects_non_positive() -> None:
    with pytest.raises(ValueError):
        JointShape(stages=0)
