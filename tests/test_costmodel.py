"""The one cost model's formulas (milp_partition.costmodel) on hand-computed cases; no torch needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from milp_partition.costmodel.memory import MemoryCoefficients, stage_memory
from milp_partition.costmodel.step import (
    DDP_BUCKET_BYTES,
    StageTimes,
    ddp_allreduce_s,
    in_flight,
    message_s,
    operator_s,
    optimizer_step_s,
    step_time,
)
from milp_partition.run import predict


def test_run_prediction_uses_the_cost_models_formula() -> None:
    """run/predict.py prices with the one module's step, not a copy of it."""
    assert predict.step_time is step_time and predict.StageTimes is StageTimes


def test_operator_overhead_does_not_scale_with_the_micro_batch() -> None:
    # o = 1e-5 s; 1e6 FLOPs per sample at 1e9 FLOP/s = 1e-3 s; bytes 1e3 at 1e-9 s/B = 1e-6 s (compute bound)
    one = operator_s(1e6, 1e3, 1e-5, 1e9, 1e-9)
    eight = operator_s(8e6, 8e3, 1e-5, 1e9, 1e-9)
    assert one == pytest.approx(1e-5 + 1e-3)
    assert eight == pytest.approx(1e-5 + 8e-3)
    assert eight < 8 * one  # a larger micro-batch amortises the overhead
    assert operator_s(0.0, 1e6, 0.0, 1e9, 1e-9) == pytest.approx(1e-3)  # memory bound


def test_ddp_buckets_and_latency_in_the_empty_step() -> None:
    w = 60 * 2**20  # three buckets of 25 MiB
    assert ddp_allreduce_s(w, 2, 1e-3, 1e-9) == pytest.approx(3e-3 + w * 1e-9)
    assert ddp_allreduce_s(w, 2, 1e-3, 1e-9, DDP_BUCKET_BYTES, latencies_in_fixed=1) == pytest.approx(2e-3 + w * 1e-9)
    assert ddp_allreduce_s(w, 1, 1e-3, 1e-9) == 0.0
    # rho: DDP's all-reduce inside a step beyond the idle fit, per byte; nothing on one replica
    assert ddp_allreduce_s(w, 2, 1e-3, 1e-9, DDP_BUCKET_BYTES, 1, 3e-9) == pytest.approx(2e-3 + w * 4e-9)
    assert ddp_allreduce_s(w, 1, 1e-3, 1e-9, DDP_BUCKET_BYTES, 0, 3e-9) == 0.0
    assert message_s(1000, 1e-4, 1e-8) == pytest.approx(1e-4 + 1e-5)
    assert optimizer_step_s(4, 1000, 1e-5, 1e-9) == pytest.approx(4e-5 + 1e-6)


def test_one_f_one_b_fill_and_drain() -> None:
    # u = (4, 5); m = 4; E = 1: 9 + 3 * 5 + 1 = 25; tails 1.5 and 2: step 27
    stages = [StageTimes(1.0, 2.0, send_s=0.5, allreduce_s=0.5, optimizer_s=1.0), StageTimes(2.0, 3.0, optimizer_s=2.0)]
    pred = step_time(stages, 4, fixed_s=1.0)
    assert (pred.pipeline_s, pred.step_s, pred.bottleneck_stage) == pytest.approx((25.0, 27.0, 1))


def test_in_flight_under_1f1b() -> None:
    assert [in_flight(q, 4, 8) for q in range(4)] == [4, 3, 2, 1]
    assert [in_flight(q, 4, 2) for q in range(4)] == [2, 2, 2, 1]
    assert [in_flight(q, 2, 8, first_stage_extra=1) for q in range(2)] == [3, 1]  # torch's schedule, measured
    # the first step's shape-inference forward: one more on the first stage even with one micro-batch (measured)
    assert in_flight(0, 1, 1, first_stage_extra=1) == 2 and in_flight(1, 2, 2, first_stage_extra=1) == 1
    with pytest.raises(ValueError):
        in_flight(4, 4, 8)


def test_memory_terms_add_up() -> None:
    coeffs = MemoryCoefficients(optimizer_state_bytes_per_param_byte=2.0, rounding_bytes=512, workspace_bytes=100.0)
    mem = stage_memory(1000.0, 10.0, 50.0, 20.0, 30.0, microbatch_size=4, in_flight=3, tensors=6, coeffs=coeffs)
    # 1000 weights + 1000 grads + 2000 Adam + 10 buffers + 3 * 4 * 50 + 4 * (20 + 30) + 6 * 512 + 100
    assert mem.total_bytes == pytest.approx(1000 + 1000 + 2000 + 10 + 600 + 200 + 3072 + 100)


def test_runs_prediction_reads_the_plans_rho(tmp_path: Path) -> None:
    """run's prediction takes rho(d, b) of its own shape from the plan's cost_model (0 at d = 1, for another (d, b), for
    a plan that records none or cannot be read)."""
    import json
    from dataclasses import replace

    from milp_partition.run.predict import planned_ddp_in_step
    from milp_partition.run.spec import RunSpec, RunStage

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"cost_model": {"ddp_in_step_s_per_byte": [[2, 4, 5e-9], [2, 2, 7e-9]]}}))
    stage = RunStage(nodes=("a",), data_parallel=2, tensor_parallel=1, recomputed=(), predicted_memory_bytes=0.0)
    spec = RunSpec("m:f", ("4x2",), "float32", (stage,), ("a",), 2, 1.0, 0.0, "g.json", str(plan), microbatch_size=4)
    assert planned_ddp_in_step(spec) == 5e-9
    assert planned_ddp_in_step(replace(spec, microbatch_size=2)) == 7e-9
    assert planned_ddp_in_step(replace(spec, microbatch_size=1)) == 0.0
    assert planned_ddp_in_step(replace(spec, stages=(replace(stage, data_parallel=1),))) == 0.0
    assert planned_ddp_in_step(replace(spec, plan_path=str(tmp_path / "missing.json"))) == 0.0
