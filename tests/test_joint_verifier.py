"""The joint verifier on small cases worked by hand, and every rule it checks."""

from __future__ import annotations

import pytest
from test_joint_io import tiny

from milp_partition.io.piper import joint_from_dict
from milp_partition.joint.problem import JointPlan, JointStage
from milp_partition.verifiers.joint import verify_joint

V = "vanilla"


def plan(*stages: tuple[tuple[str, ...], int, int, dict[str, str]]) -> JointPlan:
    return JointPlan(tuple(JointStage(nodes, d, t, cfg) for nodes, d, t, cfg in stages))


def test_one_stage_data_parallel_by_hand() -> None:
    p = joint_from_dict(tiny(), "tiny")
    rep = verify_joint(p, plan((("0", "1"), 2, 1, {"0": V, "1": V})))
    # compute (1 + 2) / 2; no edge crosses; all-reduce 4 (2 - 1) (8 + 8) / (2 * 4) = 8 bytes over B = 10
    assert rep.feasible and rep.objective == pytest.approx(1.5 + 0.8, rel=1e-15)
    assert rep.stages[0].microbatches_in_flight == 1 and rep.stages[0].memory_bytes == 6.0
    assert rep.devices == 2


def test_two_stages_by_hand() -> None:
    p = joint_from_dict(tiny(), "tiny")
    rep = verify_joint(p, plan((("0",), 1, 1, {"0": V}), (("1",), 1, 1, {"1": V})))
    # stage 1: s = 2, y = 2, memory 2 * 2 + 1; E = 2 * 5 -> 1 + 10 / 10; stage 2: y = 1, 2 + 10 / 10
    assert rep.feasible
    assert [s.time_per_sample_s for s in rep.stages] == pytest.approx([2.0, 3.0])
    assert [s.memory_bytes for s in rep.stages] == [5.0, 3.0]
    assert [s.microbatches_in_flight for s in rep.stages] == [2, 1]
    assert rep.objective == pytest.approx(3.0)


def test_sync_bytes_of_the_chosen_configuration_count() -> None:
    data = tiny()
    data["nodes"][1]["TMPCs"]["1"][1]["syncTimeFw"] = {"0": 5.0}  # recomputation adds 5 bytes on a -> b
    p = joint_from_dict(data, "tiny")
    rep = verify_joint(p, plan((("0",), 1, 1, {"0": V}), (("1",), 1, 1, {"1": "activation recomp"})))
    # stage 2: 3 + 2 (5 + 5) / 10 = 5; stage 1 pays the edge at a's bw sync (0): 1 + 1
    assert [s.time_per_sample_s for s in rep.stages] == pytest.approx([2.0, 5.0])


def test_memory_limit() -> None:
    data = tiny()
    data["maxMemoryPerDevice"] = 4.0
    p = joint_from_dict(data, "tiny")
    rep = verify_joint(p, plan((("0",), 1, 1, {"0": V}), (("1",), 1, 1, {"1": V})))
    assert not rep.feasible and any("stage 1 needs 5" in v for v in rep.violations)


@pytest.mark.parametrize(
    ("stages", "expect"),
    [
        (((("1",), 1, 1, {"1": V}), (("0",), 1, 1, {"0": V})), "back to stage"),
        (((("0", "1"), 3, 1, {"0": V, "1": V}),), "does not divide"),
        (((("0", "1"), 4, 1, {"0": V, "1": V}),), "uses 4 devices"),
        (((("0", "1"), 1, 1, {"0": V, "1": "fast"}),), "no configuration 'fast'"),
        (((("0", "1"), 1, 2, {"0": V, "1": V}),), "no configurations for tensor_parallel 2"),
        (((("0",), 1, 1, {"0": V}),), "nodes in no stage"),
        (((("0", "1"), 1, 1, {"0": V, "1": V}), (("1",), 1, 1, {"1": V})), "is in stages 1 and 2"),
        (((("0", "1", "x"), 1, 1, {"0": V, "1": V}),), "unknown node 'x'"),
        ((((), 1, 1, {}),), "has no nodes"),
    ],
)
def test_violations(stages, expect: str) -> None:
    p = joint_from_dict(tiny(), "tiny")
    rep = verify_joint(p, plan(*stages))
    assert not rep.feasible and any(expect in v for v in rep.violations), rep.violations
