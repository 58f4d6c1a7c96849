"""One solve of a wide graph past the ideal cap, shared by the tests that each check a part of that chain.

tests/test_joint_orders.py (the order DP ran), tests/test_joint_segment_bound.py (the segment bound ran and stays
below the optimum) and tests/test_joint_stage_bound.py (the stage bound likewise) asserted different things about the
same solve of the same problem with the same settings; it runs once per session instead of three times.  Import it
as ``joint_past_the_cap`` (one module, one cache).
"""

from __future__ import annotations

import functools

from milp_partition.joint.generators import parallel_branches
from milp_partition.joint.problem import JointProblem, JointSolveSettings
from milp_partition.joint.schedule import JointSchedule
from milp_partition.joint.solve import solve_joint
from milp_partition.result import Result

GIB = 2**30


@functools.cache
def solved_past_the_ideal_cap() -> tuple[JointProblem, Result]:
    """Three branches of three on 4 devices at 0.5 GiB, solved with a cap of 10 ideals (the wide-graph chain).

    Without the column bound: it runs before the stage bound and, proving a target, leaves it out
    (tests/test_joint_column_bound.py checks the chain with it)."""
    problem = parallel_branches(3, 3, 4, 0.5 * GIB, seed=2)
    settings = JointSolveSettings(time_limit_s=20.0, max_ideals=10, threads=1, schedule=JointSchedule().capped(column_bound=0))
    return problem, solve_joint(problem, settings)
