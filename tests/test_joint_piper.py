"""Piper's reference values (shared/benchmarks/README.md, joint/): our optimum is never worse, infeasible where Piper finds nothing.

Only the small configurations run here (each proven in seconds); the whole table is the benchmark's
(``benchmarks/joint_bench.py`` -> ``results/joint.md``).
"""

from __future__ import annotations

import pytest
from test_joint_io import GIB, JOINT, needs_shared

from milp_partition.io.piper import read_joint
from milp_partition.joint.problem import JointSolveSettings
from milp_partition.joint.solve import solve_joint


@needs_shared
@pytest.mark.parametrize(("k", "memory_gib", "piper"), [(8, 1, None), (8, 8, 0.16585575), (32, 2, 0.0665495)])
def test_bert32_against_piper(k: int, memory_gib: float, piper: float | None) -> None:
    problem = read_joint(JOINT / "bert32a100.json", devices=k, memory_bytes=memory_gib * GIB, bandwidth_bytes_per_s=25 * GIB)
    result = solve_joint(problem, JointSolveSettings(time_limit_s=3600.0))
    if piper is None:
        assert result.status == "infeasible"
        return
    assert result.status == "optimal"
    assert result.objective <= piper * (1 + 1e-7)
    assert result.bound is not None and result.bound <= result.objective
    # every baseline is a verified plan, hence no better than the proven optimum
    for run in result.heuristics:
        if run.objective is not None:
            assert run.objective >= result.objective * (1 - 1e-9)
