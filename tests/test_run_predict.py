"""The run's step-time formula (:mod:`milp_partition.run.predict`) on hand-computed cases; no torch needed."""

from __future__ import annotations

import pytest

from milp_partition.run.predict import StageTimes, step_time


def test_one_f_one_b_two_stages_hand_computed() -> None:
    # stage 1: f 1, b 2, send 0.5 -> u1 = 1 + 2 + 2 * 0.5 = 4; stage 2: f 2, b 3 -> u2 = 5 (the bottleneck)
    # m = 4, E = 1: pipeline = (4 + 5) + 3 * 5 + 1 = 25; tails: 0.5 + 1 and 0 + 2 -> 2; step = 27
    stages = [StageTimes(1.0, 2.0, send_s=0.5, allreduce_s=0.5, optimizer_s=1.0), StageTimes(2.0, 3.0, optimizer_s=2.0)]
    pred = step_time(stages, 4, fixed_s=1.0)
    assert pred.pipeline_s == pytest.approx(25.0)
    assert pred.step_s == pytest.approx(27.0)
    assert pred.bottleneck_stage == 1


def test_equal_stages_give_m_plus_p_minus_one_times_the_stage() -> None:
    p, m, u = 3, 8, 0.1
    pred = step_time([StageTimes(0.04, 0.06)] * p, m)
    assert pred.pipeline_s == pytest.approx((m + p - 1) * u)


def test_one_stage_is_m_micro_batches_plus_the_data_parallel_tail() -> None:
    pred = step_time([StageTimes(0.01, 0.02, allreduce_s=0.005, optimizer_s=0.001)], 4)
    assert pred.step_s == pytest.approx(4 * 0.03 + 0.006)


def test_refuses_no_stage() -> None:
    with pytest.raises(ValueError):
        step_time([], 4)
