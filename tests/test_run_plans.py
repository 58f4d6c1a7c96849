"""``milp-partition run``: a 2-process plan of a tiny MLP on gloo against one process (no timing asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milp_partition.cli.dispatch import main

pytest.importorskip("torch")


def _solve(tmp_path: Path, graph: Path, name: str, *shape: str, devices: int = 2) -> Path:
    plan = tmp_path / f"{name}.json"
    rc = main(
        [
            "solve",
            str(graph),
            "--problem",
            "joint",
            "--devices",
            str(devices),
            "--memory",
            "1GiB",
            "--microbatches",
            "4",
            *shape,
            "--quiet",
            "-o",
            str(plan),
        ]
    )
    assert rc == 0
    return plan


def _mlp_graph(tmp_path: Path) -> Path:
    graph = tmp_path / "m.json"
    args = ["import", "torch", "milp_partition.importers.models:mlp_small_test", "--input", "8x32", "--training"]
    assert main([*args, "--granularity", "layer", "--output", str(graph)]) == 0
    return graph


def test_a_one_device_plan_runs(tmp_path: Path) -> None:
    # one rank has no peer: the link measurement pinged rank 1 and the run waited for ever (seen on a one-GPU machine)
    import subprocess
    import sys

    plan = _solve(tmp_path, _mlp_graph(tmp_path), "one", devices=1)
    assert [(st["data_parallel"], st["tensor_parallel"]) for st in json.loads(plan.read_text())["stages"]] == [(1, 1)]
    out = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "milp_partition", "run", str(plan), "--steps", "2", "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)  # a guard against the hang, not a speed check
    assert done.returncode == 0, done.stderr
    run = json.loads(out.read_text())
    assert run["ranks"] == 1 and len(run["losses"]) == 2
    assert run["loss_max_rel_diff"] <= 1e-4
    assert run["predicted_step_s"] > 0 and run["measured_step_s"] > 0


def test_a_run_goes_on_gpus_only_with_one_gpu_per_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    # nccl refuses two ranks on one GPU: a 2-device plan on a one-GPU machine failed inside the workers (seen on an H200)
    import torch

    from milp_partition.run.engine import uses_cuda

    for available, gpus, world, expected in [(True, 1, 1, True), (True, 1, 2, False), (True, 2, 2, True), (False, 0, 1, False)]:
        monkeypatch.setattr(torch.cuda, "is_available", lambda a=available: a)
        monkeypatch.setattr(torch.cuda, "device_count", lambda g=gpus: g)
        assert uses_cuda(world) is expected, (available, gpus, world)


def test_the_reference_gives_the_same_losses_on_a_named_device(tmp_path: Path) -> None:
    # the single-process reference runs where rank 0 ran (on a GPU run, the GPU); the batches are drawn before the move
    from milp_partition.run.engine import reference
    from milp_partition.run.spec import read_run_spec

    spec = read_run_spec(_solve(tmp_path, _mlp_graph(tmp_path), "one", devices=1))
    here, named = reference(spec, 2, 0), reference(spec, 2, 0, device="cpu")
    assert here["losses"] == named["losses"] and len(here["step_s"]) == len(named["step_s"]) == 2


@pytest.mark.parametrize("gpus", [None, 1])
def test_two_process_pipeline_plan_matches_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: int | None) -> None:
    # gpus=1: as on a one-GPU machine (CUDA there, one GPU for two ranks): the ranks run on the CPU and run.json says so
    if gpus is not None:
        import torch

        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    graph = tmp_path / "m.json"
    rc = main(
        [
            "import",
            "torch",
            "milp_partition.importers.models:mlp_small_test",
            "--input",
            "8x32",
            "--training",
            "--granularity",
            "layer",
            "--output",
            str(graph),
        ]
    )
    assert rc == 0
    plan = _solve(tmp_path, graph, "pp", "--stages", "2")
    stages = json.loads(plan.read_text())["stages"]
    assert len(stages) == 2 and all(st["data_parallel"] == 1 and st["tensor_parallel"] == 1 for st in stages)
    out = tmp_path / "run.json"
    assert main(["run", str(plan), "--steps", "3", "-o", str(out)]) == 0
    run = json.loads(out.read_text())
    assert run["ranks"] == 2
    assert len(run["losses"]) == len(run["single_process_losses"]) == 3
    assert run["loss_max_rel_diff"] <= 1e-4
    assert run["predicted_step_s"] > 0 and run["measured_step_s"] > 0
    assert [m["stage"] for m in run["memory"]] == [1, 2]
    assert len(run["prediction"]["stages"]) == 2 and run["prediction"]["step_s"] == run["predicted_step_s"]
    assert run["backend"] == "gloo"
    assert any("ran on the CPU" in n for n in run["notes"]) is (gpus is not None)
    # each stage's seconds in its own passes: positive, and within the step that holds them (the median of each rank's
    # is at most the median of the steps' slowest rank)
    assert len(run["measured_compute_s"]) == 2
    assert all(0 < x <= run["measured_step_s"] for x in run["measured_compute_s"])
    # each rank's main thread per step: on a core for at most the step's wall seconds (the median of each rank's at most
    # the median of the steps' slowest rank), runnable but waiting for a core 0 or more (NaN: no schedstat here)
    assert len(run["measured_cpu_s"]) == len(run["measured_runqueue_wait_s"]) == 2
    assert all(0 < x <= run["measured_step_s"] for x in run["measured_cpu_s"])
    assert all(w >= 0 or w != w for w in run["measured_runqueue_wait_s"])
    # each rank on a core of its own where the machine has one per rank (run/pinning.py), else left to the scheduler
    import os

    cores = run["rank_cores"]
    if len(os.sched_getaffinity(0)) >= 2:
        assert run["pinned"] and all(len(c) == 1 for c in cores) and cores[0] != cores[1]
    for r in run["rank_steps"]:  # every step: its thread's seconds on a core are within the step's wall seconds
        assert len(r["step_s"]) == len(r["cpu_s"]) == len(r["runqueue_wait_s"]) == 3
        assert all(0 < c <= w for c, w in zip(r["cpu_s"], r["step_s"]))
    spread = run["measured_step_spread"]
    assert spread["min_s"] <= spread["q1_s"] <= run["measured_step_s"] <= spread["q3_s"] <= spread["max_s"]


def test_spec_takes_mixed_degrees_and_refuses_a_degree_that_does_not_divide_n(tmp_path: Path) -> None:
    # stages with different degrees run (milp_partition.run.mixed); a data-parallel degree must divide N
    from milp_partition.errors import InputError
    from milp_partition.run.spec import read_run_spec

    graph = tmp_path / "g.json"
    nodes = [{"id": "a"}, {"id": "b"}]
    graph.write_text(json.dumps({"nodes": nodes, "layers": {"model": {"reference": "m:f", "inputs": ["1x2"]}}}))
    plan = tmp_path / "p.json"

    def write(d_first: int) -> None:
        stages = [
            {"nodes": ["a"], "data_parallel": d_first, "tensor_parallel": 1, "configs": {"a": "vanilla"}},
            {"nodes": ["b"], "data_parallel": 1, "tensor_parallel": 2, "configs": {"b": "vanilla"}},
        ]
        instance = {"source": str(graph), "microbatches": 4}
        plan.write_text(json.dumps({"problem": "joint", "stages": stages, "instance": instance, "time_per_sample": 1.0}))

    write(2)
    spec = read_run_spec(plan, factory="m:f")
    assert not spec.uniform and spec.degrees == ((2, 1), (1, 2)) and spec.world_size == 4
    write(3)
    with pytest.raises(InputError, match="stage 1: data-parallel degree 3 does not divide"):
        read_run_spec(plan, factory="m:f")


def test_the_layer_timer_and_the_link_probe_wait_for_the_gpu_only_on_a_gpu() -> None:
    # a GPU device (named, or a torch.device; none needs a GPU to exist) makes both synchronise; the CPU and None not
    import torch

    from milp_partition.run.predict import is_cuda

    assert is_cuda("cuda") and is_cuda(torch.device("cuda", 0))
    assert not is_cuda(None) and not is_cuda("cpu") and not is_cuda(torch.device("cpu"))


def test_the_split_prints_no_torch_deprecation_of_its_own() -> None:
    """torch 2.13's ``pipeline()`` warns (FutureWarning, a deprecated LeafSpec check inside its own deep copy) on every
    split; :func:`traced_pipeline` splits without it, and the warning is still raised outside it (so the test is live)."""
    import warnings

    import torch
    from torch.distributed.pipelining import SplitPoint, pipeline

    from milp_partition.run.engine import traced_pipeline

    def model() -> torch.nn.Module:  # a fresh one per split: torch's export does not trace one module twice here
        return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))

    points = {"1": SplitPoint.BEGINNING}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert traced_pipeline(model(), (torch.randn(2, 4),), None, points).num_stages == 2
        assert not [w for w in caught if "LeafSpec" in str(w.message)]
        pipeline(model(), (torch.randn(2, 4),), None, split_spec=points)
        assert [w for w in caught if "LeafSpec" in str(w.message) and w.category is FutureWarning]
