"""Issue 20 item 6: every pipeline and joint report says which memory model it used (one imported training model)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from milp_partition.cli.dispatch import main


@pytest.fixture(scope="module")
def training_import(tmp_path_factory):
    out = tmp_path_factory.mktemp("mm") / "gpt.json"
    args = ["import", "torch", "milp_partition.importers.models:gpt_small_test", "--input", "1x32:int64", "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(out)]) == 0
    return out


def test_pipeline_and_joint_reports_name_their_memory_model(training_import, capsys):
    capsys.readouterr()
    assert main(["solve", str(training_import), "--devices", "4", "--memory", "1GiB", "--time-limit", "30"]) == 0
    static = capsys.readouterr().out
    assert "memory     static: parameters + one copy of the activations" in static
    assert "counts no micro-batches in flight" in static  # a training graph: the gap to 1F1B and joint is said
    args = ["solve", str(training_import), "--devices", "4", "--memory", "1GiB", "--memory-model", "1f1b", "--time-limit", "30"]
    assert main(args) == 0
    assert "memory     1f1b: stage i of 4 keeps s - i micro-batches" in capsys.readouterr().out
    assert main(["solve", str(training_import), "--problem", "joint", "--devices", "4", "--memory", "1GiB"]) == 0
    assert "memory     in flight (Piper)" in capsys.readouterr().out


@pytest.mark.xfail(strict=True, reason="issue 20 item 6: 1F1B's stage order is applied to the backward edges too")
def test_1f1b_splits_an_imported_training_graph(training_import, tmp_path, capsys):
    res = tmp_path / "r.json"
    args = ["solve", str(training_import), "--devices", "4", "--memory", "1GiB", "--memory-model", "1f1b", "-q"]
    assert main([*args, "--time-limit", "30", "--output", str(res)]) == 0
    used = {d for d in json.loads(res.read_text())["assignment"].values()}
    assert len(used) > 1  # today every node lands on the last accelerator: backward edges run to earlier stages
