"""Each rank's saved activations at tensor-parallel degree t > 1 (issue 42, item 3): a_v(t, b) as the run counts it on
the t-rank mesh (run/tp_saved.py, measured in the calibration launch of run/empty.py), priced by the one cost model in
the DP (joint/run_dp.py) and the verifier's own recomputation (verifiers/joint_run.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

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


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GPT-small imported for training at a global batch of 4 sequences of 32 tokens."""
    pytest.importorskip("torch")
    from milp_partition.cli.dispatch import main

    out = tmp_path_factory.mktemp("tpmem") / "gpt.json"
    args = ["import", "torch", "milp_partition.importers.models:gpt_small_test", "--input", "4x32:int64", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(out)]) == 0
    return out


def _gpt_splits(gpt: Path) -> dict:
    from milp_partition.importers.timing import load_profile_spec
    from milp_partition.io.imported_layers import read_layers
    from milp_partition.joint.run_split import offered_degrees

    model = read_layers(json.loads(gpt.read_text()), str(gpt))
    splits, _ = offered_degrees(model, [2], load_profile_spec("H100"))
    return splits


def test_a_row_modules_bias_stays_whole_on_every_rank(gpt: Path) -> None:
    """RowwiseParallel replicates a row module's bias: GPT-small's block at t = 2 holds, per rank, by hand (float32):
    two layer norms 2 x (2 x 128 x 4) = 2048, QKV (128 x 384 + 384) x 4 / 2 = 99072, the projection 128 x 128 x 4 / 2 +
    its bias 128 x 4 = 33280, the MLP's first (128 x 512 + 512) x 4 / 2 = 132096 and second 512 x 128 x 4 / 2 + 512 =
    131584: 398080 bytes (dividing the row biases too would under-count by 512 bytes a block)."""
    assert _gpt_splits(gpt)[2]["h.0"].param_bytes == 398080.0


def test_planned_memory_at_t2_bounds_what_the_run_holds(gpt: Path, tmp_path: Path) -> None:
    """On a 2-rank mesh: each layer's saved bytes as the calibration counts them (run/tp_saved.py), the plan 1 x 1 x 2
    with one micro-batch of the global batch priced with them (the verifier's memory), against two steps of the model
    split as run splits it on the same mesh, counted as run.json counts them: every rank's planned memory is at least
    what it held and at most 20% above (issue 42's bar; with the t = 1 count it was 1.40 in results/plan_fidelity.md).
    Each block saves less on a rank at t = 2 than at t = 1, and both ranks count the same."""
    from milp_partition.joint.run_layers import run_problem_from_imported, with_saved_at_degree
    from milp_partition.run.launch import run_ranks
    from milp_partition.run.predict import time_layers_by_size
    from tests.run_workers import tp_saved_and_held

    data = json.loads(gpt.read_text())
    G = 4
    one = time_layers_by_size(data, str(gpt), [G], repeats=1)  # the t = 1 count, as --time-layers takes it
    run_ranks(tp_saved_and_held, 2, (2, str(tmp_path / "store"), str(gpt), G, str(tmp_path)), str(tmp_path))
    ranks = [json.loads((tmp_path / f"tp{r}.json").read_text()) for r in range(2)]
    assert ranks[0]["saved"] == ranks[1]["saved"]
    at_t = {int(b): by for b, by in ranks[0]["saved"].items()}
    again = {int(b): by for b, by in ranks[0]["reused"].items()}
    for v in (f"h.{i}" for i in range(12)):
        assert 0 < at_t[G][v] < one.saved_bytes_per_sample[G][v]
    problem = run_problem_from_imported(
        data, str(gpt), devices=2, memory_bytes=1e12, global_batch=G, sizes=[G], coefficients=RunCoefficients(),
        times=one.times, saved_bytes_per_sample_at=one.saved_bytes_per_sample,
        reused_bytes_per_sample_at=one.reused_bytes_per_sample, splits=_gpt_splits(gpt),
    )  # fmt: skip
    plan = RunPlan(((0, len(problem.layers)),), 1, 1, frozenset(), 2)
    before = verify_run_plan(problem, plan).memory[0].total_bytes  # the t = 1 count of saved activations
    measured = with_saved_at_degree(problem, {2: at_t}, {2: again})
    planned = verify_run_plan(measured, plan).memory[0].total_bytes
    for r in ranks:
        held = sum(r["held"])
        assert held <= planned <= 1.20 * held, (planned, held, r["held"])
        assert before > 1.20 * held  # what the t = 1 count planned: over the bar
