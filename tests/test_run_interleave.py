"""Timings spread over time (milp_partition.run.interleave): the sizes in turn round by round for at least S seconds,
the count agreed over the ranks; ``run --seconds`` / ``--warmup-seconds`` and ``solve --calibration-seconds`` reach them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from milp_partition.run.interleave import (
    MOST_ROUNDS,
    SizeGroup,
    interleaved_rounds,
    model_bytes,
    rounds_for,
    size_groups,
    steps_for_seconds,
)


def test_rounds_last_the_seconds_asked_at_the_first_rounds_pace_within_the_bounds() -> None:
    assert rounds_for(7, 0.0, 0.01) == 7  # nothing asked: the rounds given
    assert rounds_for(7, 1.0, 0.01) == 100
    assert rounds_for(7, 0.05, 0.01) == 7  # never fewer than given
    assert rounds_for(7, 1e6, 0.01) == MOST_ROUNDS
    assert rounds_for(3, 1.0, 0.0) == MOST_ROUNDS  # an unmeasurably short round: the cap
    with pytest.raises(ValueError):
        rounds_for(0, 1.0, 0.1)


def test_every_item_takes_one_pass_a_round_in_order_after_a_warm_up_round_and_the_count_is_agreed() -> None:
    calls: list[tuple[str, bool]] = []
    agreed: list[float] = []

    def agree(first_s: float) -> float:
        agreed.append(first_s)
        return 0.001  # the slowest rank's first round, as every rank is told: 10 rounds for 0.01 s

    total = interleaved_rounds(["a", "b", "c"], lambda x, record: calls.append((x, record)), 2, 0.01, agree)
    assert total == 10 and len(agreed) == 1  # one collective, after the first recorded round
    assert calls[:3] == [("a", False), ("b", False), ("c", False)]  # the warm-up round
    assert calls[3:] == [(x, True) for _ in range(10) for x in "abc"]  # a, b, c, a, b, c, ...: interleaved
    calls.clear()
    assert interleaved_rounds(["a", "b"], lambda x, record: calls.append((x, record)), 3) == 3  # no seconds: the rounds
    assert calls == [("a", False), ("b", False)] + [(x, True) for _ in range(3) for x in "ab"]


def test_a_run_asked_for_seconds_takes_enough_steps_at_the_planned_pace() -> None:
    assert steps_for_seconds(6, 1, 0.01, 0.0, 0.0, 10_000) == (6, 1)  # nothing asked
    assert steps_for_seconds(6, 1, 0.01, 1.0, 0.0, 10_000) == (101, 1)  # 100 timed steps of 0.01 s
    assert steps_for_seconds(6, 1, 0.01, 0.0, 0.5, 10_000) == (55, 50)  # 50 warm-up steps, the 5 timed ones kept
    assert steps_for_seconds(200, 1, 0.01, 1.0, 0.0, 10_000) == (200, 1)  # --steps already longer
    assert steps_for_seconds(6, 1, 0.01, 1e6, 1e6, 1_000) == (1_000, 999)  # the cap, one timed step left at least
    assert steps_for_seconds(6, 1, float("nan"), 5.0, 5.0, 10_000) == (6, 1)  # no estimate: nothing more
    with pytest.raises(ValueError):
        steps_for_seconds(0, 0, 0.01, 1.0, 0.0, 10)


def test_sizes_are_interleaved_only_when_their_models_fit_together() -> None:
    assert size_groups([4, 1, 2, 2], 10.0, 3.0, most_bytes=30.0) == [SizeGroup((1, 2, 4), 3.0)]
    assert size_groups([4, 1, 2], 11.0, 3.0, most_bytes=30.0) == [
        SizeGroup((1,), 1.0),
        SizeGroup((2,), 1.0),
        SizeGroup((4,), 1.0),
    ]
    assert size_groups([], 1.0, 3.0) == []
    data = {
        "nodes": [{"id": "a", "param_bytes": 100}, {"id": "b", "param_bytes": 50}],
        "layers": {"optimizer_state_bytes_per_param_byte": 2.0},
    }
    assert model_bytes(data) == 150 * 4  # weights, gradients, two bytes of state per byte


def test_lockstep_timing_over_seconds_gives_every_size_the_same_passes(tmp_path: Path) -> None:
    """time_layers_in_lockstep with min_seconds on a one-rank gloo group (the count agreed by the group's all-reduce):
    every size and its DDP copy the same number of passes, at least the repeats asked."""
    pytest.importorskip("torch")
    import torch.distributed as dist

    from milp_partition.run.empty import largest_over_group
    from milp_partition.run.predict import time_layers_in_lockstep
    from tests.one_rank import one_rank_group, small_mlp_graph

    graph, data = small_mlp_graph(tmp_path)
    with one_rank_group(tmp_path):
        assert largest_over_group(2.5) == 2.5
        got = time_layers_in_lockstep(
            data, str(graph), [1, 2], dist.barrier, repeats=2, ddp={1: (dist.group.WORLD, (2,))},
            min_seconds=0.05, agree_max=largest_over_group,
        )  # fmt: skip
    counts = {len(f) for t in got.layers.values() for f, g in t.values()} | {len(got.ddp_totals[(1, 2)])}
    assert len(counts) == 1 and counts.pop() >= 2


def test_run_takes_the_steps_its_seconds_ask_for(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from milp_partition.cli.dispatch import main
    from milp_partition.run.spec import read_run_spec

    graph = tmp_path / "m.json"
    args = ["import", "torch", "milp_partition.importers.models:mlp_small_test", "--input", "8x32", "--training"]
    assert main([*args, "--granularity", "layer", "--output", str(graph)]) == 0
    plan = tmp_path / "one.json"
    solve = ["solve", str(graph), "--problem", "joint", "--devices", "1", "--memory", "1GiB", "--microbatches", "2"]
    assert main([*solve, "--quiet", "-o", str(plan)]) == 0
    step = read_run_spec(plan, None, None).predicted_step_s
    assert step > 0 and math.isfinite(step)
    out = tmp_path / "run.json"
    # 4.5 and 1.5 planned steps: 5 timed steps after 2 of warm-up (where --steps 2 --warmup 1 gave 1 after 1)
    flags = ["--steps", "2", "--seconds", repr(4.5 * step), "--warmup-seconds", repr(1.5 * step), "-o", str(out)]
    assert main(["run", str(plan), *flags]) == 0
    run = json.loads(out.read_text())
    assert run["steps"] == 7 and run["warmup_steps"] == 2 and len(run["losses"]) == 7
    assert run["loss_max_rel_diff"] <= 1e-4


def test_the_empty_steps_of_every_shape_are_timed_in_turn_over_seconds() -> None:
    """calibrate_empty_steps with calibration_seconds: one launch of one rank, its shapes' empty steps stepped in turn
    (the count agreed by the group's all-reduce), each shape's E positive."""
    pytest.importorskip("torch")
    from milp_partition.run.empty import calibrate_empty_steps

    got = calibrate_empty_steps([(1, 1, 1), (1, 1, 8)], repeats=3, calibration_seconds=0.05)
    e = {(p, d, m): x for p, d, m, x in got.steps}
    assert set(e) == {(1, 1, 1), (1, 1, 8)} and all(x > 0 for x in e.values())


def test_two_ranks_time_the_split_layers_over_seconds_in_the_same_rounds(tmp_path: Path) -> None:
    """run/tp_timed.py with min_seconds on a 2-rank tensor-parallel mesh: each rank's first round has its own pace, and
    the count is agreed (the slowest rank's), so both ranks time every size the same number of passes, at least the
    repeats asked (a rank that ran more would hang at the other's barrier)."""
    pytest.importorskip("torch")
    from milp_partition.run.launch import run_ranks
    from tests.one_rank import small_mlp_graph
    from tests.tp_timed_workers import split_times_over_seconds

    graph, _ = small_mlp_graph(tmp_path)
    call = (2, str(tmp_path / "store"), str(graph), [1, 2], 2, 0.1, str(tmp_path))
    run_ranks(split_times_over_seconds, 2, call, str(tmp_path))
    ranks = [json.loads((tmp_path / f"over{r}.json").read_text()) for r in range(2)]
    assert ranks[0] == ranks[1] and set(ranks[0]) == {"1", "2"}
    counts = {tuple(x) for x in ranks[0].values()}
    assert len(counts) == 1 and len(counts.pop()) == 1  # every node, both directions, both sizes: one count
    assert ranks[0]["1"][0] >= 2
