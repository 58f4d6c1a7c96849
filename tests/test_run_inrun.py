"""A one-rank plan's layer times as run executes them (run/inrun.py): the layer timer scaled to the passes inside
run's own step, less the empty step's module through the same schedule code."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from milp_partition.run.inrun import in_step_factor, scaled_layers


def test_the_factor_is_the_steps_passes_less_the_schedules_own_over_the_timer() -> None:
    # 1.2 ms a micro-batch in the step's passes, 0.2 of them the tiny module's (in E already), 0.8 timed: 1.25
    assert in_step_factor(1.2e-3, 0.2e-3, 0.8e-3) == pytest.approx(1.25)
    assert in_step_factor(0.5e-3, 0.2e-3, 0.6e-3) == pytest.approx(0.5)  # the timer above the step: below 1
    assert in_step_factor(0.1e-3, 0.2e-3, 0.6e-3) == 0.0  # noise: the tiny module dearer than the model, never negative
    assert in_step_factor(1.0, 0.5, 0.0) == 1.0  # nothing timed (a model without modules): the timer's 0s stay


def test_each_node_is_scaled_by_its_directions_factor() -> None:
    got = scaled_layers({"a": 1.0, "b": 2.0}, {"a": 3.0}, (0.5, 2.0))
    assert got == {"a": (0.5, 6.0), "b": (1.0, 0.0)}


def test_in_step_timing_on_one_rank_gives_every_module_node_at_every_size(tmp_path: Path) -> None:
    """time_layers_in_step on a one-rank gloo group (run's own stage, schedule and optimizer): every node the layer timer
    stamps at each size, none negative, each size's passes positive, and the factors positive and finite."""
    pytest.importorskip("torch")
    from milp_partition.run.inrun import time_layers_in_step
    from milp_partition.run.predict import LayerTimer, layer_spec
    from tests.one_rank import one_rank_group, small_mlp_graph

    graph, data = small_mlp_graph(tmp_path)
    with one_rank_group(tmp_path):
        got = time_layers_in_step(data, str(graph), [1, 2], global_batch=2, rounds=2)
    points = LayerTimer(layer_spec(data, str(graph), [1]), samples=1).points
    assert set(got.layers) == {1, 2} and all(list(got.layers[b]) == points for b in (1, 2))
    assert all(f >= 0 and g >= 0 for t in got.layers.values() for f, g in t.values())
    assert all(sum(f + g for f, g in got.layers[b].values()) > 0 for b in (1, 2))
    assert all(math.isfinite(k) and k > 0 for b in (1, 2) for k in got.factors[b])
    assert all(timer > 0 and in_step > 0 and tiny > 0 for timer, in_step, tiny in got.passes_s.values())
    # the optimizer's step inside run's step, over the model's parameter tensors (weight and bias per linear layer)
    from milp_partition.run.model import build_model

    assert got.optimizer_s > 0
    assert got.param_tensors == len(list(build_model(layer_spec(data, str(graph), [1]), 0).parameters())) > 0


def test_runs_prediction_reads_the_plans_factors_for_one_rank_plans_only(tmp_path: Path) -> None:
    """run's prediction takes (kappa_F, kappa_B) of its micro-batch size from the plan's cost_model for a one-rank plan;
    (1, 1) for a plan of several ranks, another size, a plan that records none or cannot be read."""
    from dataclasses import replace

    from milp_partition.run.predict import planned_in_step_factors
    from milp_partition.run.spec import RunSpec, RunStage

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"cost_model": {"in_step_factors": [[1, 0.5, 0.75], [4, 1.5, 2.0]]}}))
    stage = RunStage(nodes=("a",), data_parallel=1, tensor_parallel=1)
    spec = RunSpec("m:f", ("4x2",), "float32", (stage,), ("a",), 1, 1.0, 0.0, "g.json", str(plan), microbatch_size=4)
    assert planned_in_step_factors(spec) == (1.5, 2.0)
    assert planned_in_step_factors(replace(spec, microbatch_size=1, microbatches=4)) == (0.5, 0.75)
    assert planned_in_step_factors(replace(spec, microbatch_size=2, microbatches=2)) == (1.0, 1.0)
    two = replace(spec, stages=(replace(stage, data_parallel=2),), microbatches=2)
    assert planned_in_step_factors(two) == (1.0, 1.0)
    assert planned_in_step_factors(replace(spec, plan_path=str(tmp_path / "missing.json"))) == (1.0, 1.0)


def test_runs_prediction_scales_a_one_rank_plans_layers_by_the_factors(tmp_path: Path) -> None:
    """predict_step with (kappa_F, kappa_B): the stage's forward and backward are the factors times those without them
    (the layers' own times), every other term the same."""
    from milp_partition.cli.dispatch import main
    from milp_partition.run.predict import LayerProfile, LinkFit, TorchCosts, predict_step
    from milp_partition.run.spec import RunSpec, RunStage

    graph = tmp_path / "mlp.json"
    args = ["import", "torch", "milp_partition.importers.models:mlp_small_test", "--input", "4x32", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(graph)]) == 0
    data = json.loads(graph.read_text())
    nodes = tuple(n["id"] for n in data["nodes"] if not n["id"].endswith(":bwd"))
    stage = RunStage(nodes=nodes, data_parallel=1, tensor_parallel=1)
    spec = RunSpec("m:f", ("4x32",), "float32", (stage,), nodes, 2, 1.0, 0.0, str(graph), "", data, microbatch_size=2)
    layers = LayerProfile({v: 1e-4 * (i + 1) for i, v in enumerate(nodes)}, {v: 3e-4 for v in nodes}, 1e-5)
    links = LinkFit(0.0, 0.0, 0.0, 0.0, empty_step_s=1e-3)
    plain = predict_step(spec, layers, TorchCosts(), links, in_step_factors=(1.0, 1.0))
    scaled = predict_step(spec, layers, TorchCosts(), links, in_step_factors=(0.5, 2.0))
    assert plain.stages[0].forward_s == pytest.approx(sum(layers.forward_s.values()), rel=1e-12)
    assert scaled.stages[0].forward_s == pytest.approx(0.5 * plain.stages[0].forward_s, rel=1e-12)
    assert scaled.stages[0].backward_s == pytest.approx(2.0 * plain.stages[0].backward_s, rel=1e-12)
    assert scaled.stages[0].optimizer_s == plain.stages[0].optimizer_s
    assert predict_step(spec, layers, TorchCosts(), links).costs["in_step_factors"] == [1.0, 1.0]  # no plan file


def test_recorded_factors_are_read_back_and_bad_ones_refused_naming_the_field(tmp_path: Path) -> None:
    from milp_partition.cli.joint_run import read_calibrated_empty_steps
    from milp_partition.errors import InputError

    path = tmp_path / "free.json"
    timed = {"sizes": {}, "empty_steps": [[1, 1, 2, 0.001]], "in_step_factors": [[4, 0.8, 1.1], [8, 0.9, 1.2]]}
    path.write_text(json.dumps({"cost_model": {"layer_times": timed}}))
    got = read_calibrated_empty_steps(path)
    assert got is not None and got.in_step_factors == ((4, 0.8, 1.1), (8, 0.9, 1.2))
    for bad in ([[0, 1.0, 1.0]], [[4, -0.1, 1.0]], [[4, 1.0, -2.0]]):
        path.write_text(json.dumps({"cost_model": {"layer_times": {**timed, "in_step_factors": bad}}}))
        with pytest.raises(InputError) as err:
            read_calibrated_empty_steps(path)
        assert str(path) in str(err.value) and "cost_model.layer_times.in_step_factors" in str(err.value)
    path.write_text(json.dumps({"cost_model": {"layer_times": {**timed, "in_step_factors": [[4, 1.0]]}}}))
    with pytest.raises(InputError):  # not three numbers
        read_calibrated_empty_steps(path)
    path.write_text(json.dumps({"cost_model": {"layer_times": {**timed, "optimizer_in_step": [7e-4, 12]}}}))
    got = read_calibrated_empty_steps(path)
    assert got is not None and (got.optimizer_in_step_s, got.optimizer_param_tensors) == (7e-4, 12)
    for bad in ([-1.0, 12], [float("nan"), 12], [1e-3, -1]):
        path.write_text(json.dumps({"cost_model": {"layer_times": {**timed, "optimizer_in_step": bad}}}))
        with pytest.raises(InputError) as err:
            read_calibrated_empty_steps(path)
        assert "cost_model.layer_times.optimizer_in_step" in str(err.value)
