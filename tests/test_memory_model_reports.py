"""Issue 20 item 6: every pipeline and joint report says which memory model it used (one imported training model)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")

from milp_partition.cli.dispatch import main
from milp_partition.cluster import homogeneous_cluster
from milp_partition.io import read_instance
from milp_partition.pipeline.problem import PipelineProblem, PipelineSettings, PipelineSolution, default_memory_model
from milp_partition.verifiers.pipeline import verify_pipeline

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def training_import(tmp_path_factory):
    out = tmp_path_factory.mktemp("mm") / "gpt.json"
    args = ["import", "torch", "milp_partition.importers.models:gpt_small_test", "--input", "1x32:int64", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(out)]) == 0
    return out


def test_pipeline_and_joint_reports_name_their_memory_model(training_import, capsys):
    capsys.readouterr()
    args = ["solve", str(training_import), "--devices", "4", "--memory", "1GiB", "--memory-model", "static"]
    assert main([*args, "--time-limit", "30"]) == 0
    static = capsys.readouterr().out
    assert "memory     static: parameters + one copy of the activations" in static
    assert "counts no micro-batches in flight" in static  # a training graph: the gap to 1F1B and joint is said
    args = ["solve", str(training_import), "--devices", "4", "--memory", "1GiB", "--memory-model", "1f1b", "--time-limit", "30"]
    assert main(args) == 0
    assert "memory     1f1b: stage i of 4 keeps s - i micro-batches" in capsys.readouterr().out
    assert main(["solve", str(training_import), "--problem", "joint", "--devices", "4", "--memory", "1GiB"]) == 0
    assert "memory     in flight (Piper)" in capsys.readouterr().out


@pytest.mark.parametrize("solver", ["cpsat", "cbc", "none"])
def test_1f1b_splits_an_imported_training_graph(training_import, tmp_path, solver):
    """Issue 20 item 6: 1F1B's stage order no longer applies to the gradient edges, which run to earlier stages."""
    res = tmp_path / "r.json"
    args = ["solve", str(training_import), "--devices", "4", "--memory", "1GiB", "--memory-model", "1f1b", "-q"]
    assert main([*args, "--solver", solver, "--time-limit", "30", "--output", str(res)]) == 0
    result = json.loads(res.read_text())
    where = result["assignment"]
    assert len(set(where.values())) == 4  # was one accelerator, "proven optimal"
    assert all(where[v] == where[v.removesuffix(":bwd")] for v in where)  # each backward node beside its forward node
    assert result["status"] == ("feasible" if solver == "none" else "optimal")


def test_an_imported_training_graph_defaults_to_1f1b(training_import, capsys):
    assert default_memory_model(read_instance(training_import).graph) == "1f1b"
    capsys.readouterr()
    assert main(["solve", str(training_import), "--devices", "4", "--memory", "1GiB", "--time-limit", "30"]) == 0
    out = capsys.readouterr().out
    assert "memory model 1f1b" in out and "memory     1f1b: stage i of 4 keeps s - i micro-batches" in out
    assert default_memory_model(read_instance(EXAMPLES / "bert24_training.json").graph) == "static"  # no activations
    assert default_memory_model(read_instance(EXAMPLES / "tiny.json").graph) == "static"  # forward only


def test_joint_and_pipeline_charge_the_same_memory_per_stage(training_import, tmp_path):
    """One stage per device (d = t = 1, 4 stages on 4 devices): the joint plan's memory per stage is the pipeline's
    memory per accelerator under its default model for a training graph (1F1B, optimizer factor 1: the import keeps the
    optimizer state in other bytes), for the joint's split and for the pipeline's own optimum, which is the same split.
    Both count stage i of s with s - i micro-batches of the saved activations (Piper's y = 4, 3, 2, 1), the parameters
    once and the gradient and Adam state (3 x parameters) once; the static model charges one micro-batch."""
    common = ["--devices", "4", "--memory", "1GiB", "-q"]
    joint, pipe = tmp_path / "joint.json", tmp_path / "pipe.json"
    forced = ["--problem", "joint", "--stages", "4", "--data-parallel", "1", "--tensor-parallel", "1"]
    assert main(["solve", str(training_import), *forced, *common, "-o", str(joint)]) == 0
    assert main(["solve", str(training_import), *common, "--time-limit", "30", "-o", str(pipe)]) == 0
    stages = json.loads(joint.read_text())["stages"]
    assert [st["microbatches_in_flight"] for st in stages] == [4, 3, 2, 1]
    assert all(c == "vanilla" for st in stages for c in st["configs"].values())  # no recomputation
    split = {v + tail: f"gpu{i}" for i, st in enumerate(stages) for v in st["nodes"] for tail in ("", ":bwd")}
    graph = read_instance(training_import).graph
    cluster = homogeneous_cluster(4, 1 << 30)
    problem = PipelineProblem(graph, cluster, PipelineSettings(memory_model=default_memory_model(graph)))
    report = verify_pipeline(problem, PipelineSolution(split))
    assert report.feasible, report.violations
    for i, st in enumerate(stages):  # whole bytes per node in the pipeline, a float sum in the joint
        assert report.memory_bytes[f"gpu{i}"] == pytest.approx(st["memory_bytes"], abs=len(st["nodes"]))
    pipeline = json.loads(pipe.read_text())
    assert pipeline["assignment"] == split
    assert pipeline["memory_bytes"] == report.memory_bytes
    static = verify_pipeline(replace(problem, settings=PipelineSettings()), PipelineSolution(split))
    act = {f"gpu{i}": sum(graph.node(v).activation_bytes for v in st["nodes"]) for i, st in enumerate(stages)}
    for i, dev in enumerate(act):
        assert report.memory_bytes[dev] - static.memory_bytes[dev] == (3 - i) * act[dev]
