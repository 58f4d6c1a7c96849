"""A forced joint shape that counting alone rules out is proven infeasible at once (issue 43 item 9).

``--stages 9`` on 8 devices spent the whole limit and answered "unknown"; ``--stages 1000000000`` ran for minutes.
The counting proof is checked against enumeration of every plan on random tiny problems.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from milp_partition.joint.problem import JointShape, joint_cluster
from milp_partition.joint.solve import JointSolveSettings, shape_infeasibility, solve_joint
from milp_partition.verifiers.joint import verify_joint
from tests.test_joint_bruteforce import all_plans, random_problem, repeated_chain

SHAPES = [JointShape(s, d, t) for s, d, t in itertools.product((1, 2, 3, 5), (None, 1, 2, 3), (None, 1, 2))]


@pytest.mark.parametrize("seed", range(12))
def test_a_counting_proof_agrees_with_enumeration(seed: int) -> None:
    """Where it names a reason no plan of the shape exists (every plan enumerated, scored by the verifier)."""
    base = random_problem(seed)
    for shape in SHAPES:
        problem = replace(base, shape=shape)
        reason = shape_infeasibility(problem)
        if reason is None:
            continue
        assert not any(verify_joint(problem, plan).feasible for plan in all_plans(problem)), (shape, reason)


@pytest.mark.parametrize(
    ("stages", "devices", "words"), [(9, 8, "need 9 devices; the cluster has 8"), (10**9, 8, "need at least as many layers")]
)
def test_an_impossible_stage_count_is_infeasible_without_a_search(stages: int, devices: int, words: str) -> None:
    base = repeated_chain(0, n=12)
    cluster = joint_cluster(devices, base.memory_bytes, base.cluster.bandwidth_bytes_per_s)
    problem = replace(base, cluster=cluster, microbatches=16, shape=JointShape(stages))
    result = solve_joint(problem, JointSolveSettings(time_limit_s=600.0))
    assert result.status == "infeasible"
    assert [h.name for h in result.heuristics] == ["forced-shape"]
    assert words in result.heuristics[0].message
