"""Each rank's saved activations at tensor-parallel degree t > 1 (issue 42, item 3): a_v(t, b) as the run counts it on
the t-rank mesh (run/tp_saved.py, measured in the calibration launch of run/empty.py), priced by the one cost model in
the DP (joint/run_dp.py) and the verifier's own recomputation (verifiers/joint_run.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from milp_partition.costmodel.memory import MemoryCoefficients
from milp_partition.costmodel.plan import RunCoefficients, RunLayer, RunPlan, RunPlanProblem, RunShape
from milp_partition.costmodel.tensor import SplitCost
from milp_partition.joint.run_dp import solve_run_dp
from milp_partition.verifiers.joint_run import verify_run_plan

#: No optimizer state, no rounding, no workspace, no extra micro-batch on the first stage: only the activations' terms.
PLAIN = RunCoefficients(memory=MemoryCoefficients(0.0, 0, 1.0, 0.0, 0))


def _one_layer(measured: dict[int, float], memory_bytes: float) -> RunPlanProblem:
    """One layer saving 100 bytes per sample at t = 1 (its input: 1), split at t = 2 (half its time), two devices, a
    global batch of 2 timed at micro-batch size 2 only (one micro-batch, no data parallelism), no recomputation;
    ``measured``: a_v(2, b) per size."""
    layer = RunLayer(
        "l0",
        {2: 1.0},
        {2: 2.0},
        param_bytes=0.0,
        param_tensors=0,
        buffer_bytes=0.0,
        saved_bytes_per_sample=100.0,
        input_bytes_per_sample=1.0,
        splits={2: SplitCost(0.5, 0.0, 0, 0, 0, saved_bytes_per_sample_at=measured)},
    )
    return RunPlanProblem((layer,), (), 2, 2, memory_bytes, PLAIN, recompute=False, tensor_degrees=(1, 2))


def test_a_t2_layers_measured_activations_decide_feasibility_hand_priced() -> None:
    """By hand, one stage, one micro-batch of b = 2 at t = 2: activations b a_v(2, 2) = 2 x 40 = 80 bytes, the backward's
    transient b a_v(2, 2) = 80, 160 in all: it fits 200 bytes; at t = 1 (and at t = 2 unmeasured, the t = 1 count:
    2 x 100 + 2 x 100 = 400) it does not.  The step: (1.0 + 2.0) (1 - 0.5 + 0.5 / 2) = 2.25 s."""
    problem = _one_layer({2: 40.0}, 200.0)
    got = solve_run_dp(problem)
    assert got.complete and got.plan == RunPlan(((0, 1),), 1, 1, frozenset(), 2)
    assert got.step_s == pytest.approx(2.25, rel=1e-12) and got.bound_s == pytest.approx(2.25, rel=1e-12)
    report = verify_run_plan(problem, got.plan)
    assert report.feasible and report.step_s == pytest.approx(2.25, rel=1e-12)
    mem = report.memory[0]
    assert (mem.activations_bytes, mem.temporaries_bytes, mem.total_bytes) == (80.0, 80.0, 160.0)
    one = verify_run_plan(problem, RunPlan(((0, 1),), 1, 1))  # t = 1: the whole layer's 400 bytes
    assert not one.feasible and one.memory[0].total_bytes == 400.0
    assert solve_run_dp(replace(problem, memory_bytes=159.0)).plan is None  # 1 byte short of the measured need
    unmeasured = _one_layer({1: 10.0}, 200.0)  # measured at another size only: the t = 1 count at b = 2, 400 bytes
    assert solve_run_dp(unmeasured).plan is None
    split = verify_run_plan(unmeasured, RunPlan(((0, 1),), 1, 1, frozenset(), 2))
    assert not split.feasible and split.memory[0].total_bytes == 400.0


def test_what_a_later_stage_keeps_of_what_it_receives_at_t2_hand_priced() -> None:
    """Two layers on two stages at t = 2 (4 devices), G = 2, m = 2 (b = 1): stage 2's own copy of what it receives is
    the bytes its layer saves again of layer 0's as measured at t = 2 (3 per sample), not the t = 1 figure (9) nor the
    cut (20).  Stage 2 holds 1 micro-batch in flight: 1 x (a_v(2, 1) + 3) + transient a_v(2, 1) = 10 + 3 + 10 = 23."""
    sizes = {1: 1.0, 2: 1.0}

    def layer(i: int, a: float, reused: dict[int, dict[str, float]], at_t: dict[int, dict[str, float]]) -> RunLayer:
        split = SplitCost(0.5, 0.0, 0, 0, 0, saved_bytes_per_sample_at={1: a}, reused_from_at=at_t)
        return RunLayer(f"l{i}", sizes, sizes, 0.0, 0, 0.0, 50.0, 1.0, reused_from_at=reused, splits={2: split})

    # stage 1 (2 micro-batches in flight): 2 x 5 + 5 = 15 bytes, under stage 2's 23
    layers = (layer(0, 5.0, {1: {}}, {1: {}}), layer(1, 10.0, {1: {"l0": 9.0}}, {1: {"l0": 3.0}}))
    problem = RunPlanProblem(layers, (20.0,), 2, 4, 1e6, PLAIN, recompute=False, received_measured=True, tensor_degrees=(1, 2))
    plan = RunPlan(((0, 1), (1, 2)), 1, 2, frozenset(), 2)
    report = verify_run_plan(problem, plan)
    assert report.feasible and [m.total_bytes for m in report.memory] == pytest.approx([15.0, 23.0])
    assert verify_run_plan(problem, RunPlan(((0, 1), (1, 2)), 1, 2)).memory[1].total_bytes == pytest.approx(50 + 9 + 50)
    again = replace(layers[1], splits={2: replace(layers[1].splits[2], reused_from_at={})})
    unmeasured = replace(problem, layers=(layers[0], again))
    assert verify_run_plan(unmeasured, plan).memory[1].total_bytes == pytest.approx(10 + 9 + 10)  # the t = 1 rule
    forced = replace(problem, memory_bytes=23.0, shape=RunShape(2, 1, 2, 2))
    got = solve_run_dp(forced)
    assert got.plan == plan and got.step_s == pytest.approx(verify_run_plan(forced, plan).step_s, rel=1e-12)
    assert solve_run_dp(replace(forced, memory_bytes=22.0)).plan is None
