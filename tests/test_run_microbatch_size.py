"""``run`` executes the run objective's micro-batches of ``b`` samples (``instance.microbatch_size``): on gloo the
losses of a ``b = 2`` and a ``b = 4`` plan equal one process's on the same global batch of ``N b`` samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milp_partition.errors import InputError

pytest.importorskip("torch")

# fixed operator coefficients (not timed: the plan must not depend on this machine's speed)
OPS = {"forward_overhead_s": 1e-5, "backward_overhead_s": 2e-5, "matmul_flops_per_s": 5e10, "memory_s_per_byte": 1e-10}


def _run_plan(tmp_path: Path, model: str, shape: str, global_batch: int, microbatches: int, devices: int) -> Path:
    """A 2-stage, d = 1 plan of ``model`` under ``--objective run`` with ``microbatches`` micro-batches of the batch."""
    from milp_partition.cli.dispatch import main

    graph = tmp_path / "g.json"
    args = ["import", "torch", f"milp_partition.importers.models:{model}", "--input", shape, "--training"]
    assert main([*args, "--granularity", "layer", "--output", str(graph)]) == 0
    coeffs = tmp_path / "ops.json"
    coeffs.write_text(json.dumps(OPS))
    plan = tmp_path / "plan.json"
    solve = ["solve", str(graph), "--problem", "joint", "--objective", "run", "--devices", str(devices), "--memory", "1GiB"]
    solve += ["--global-batch", str(global_batch), "--coefficients", str(coeffs), "--quiet"]
    shape_flags = ["--stages", "2", "--data-parallel", "1", "--microbatches", str(microbatches)]
    assert main([*solve, *shape_flags, "-o", str(plan)]) == 0
    return plan


def test_a_plan_of_two_sample_micro_batches_matches_one_process(tmp_path: Path) -> None:
    # a GPT (attention, reshapes between modules): pipeline() traces one micro-batch of b samples
    from milp_partition.run.launch import run_plan
    from milp_partition.run.spec import read_run_spec

    spec = read_run_spec(_run_plan(tmp_path, "gpt_small_test", "2x32:int64", 4, 2, 2))
    assert (spec.microbatches, spec.microbatch_size, spec.global_batch) == (2, 2, 4) and spec.shape == (2, 1, 1)
    run = run_plan(spec, 2)
    assert run["ranks"] == 2 and len(run["losses"]) == 2
    assert run["loss_max_rel_diff"] <= 1e-6


@pytest.fixture(scope="module")
def mlp_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-stage plan of the test MLP: a global batch of 8 in 2 micro-batches of 4, solved for 3 devices."""
    return _run_plan(tmp_path_factory.mktemp("mlp"), "mlp_small_test", "8x32", 8, 2, 3)


def _copy(plan: Path, tmp_path: Path) -> tuple[Path, dict]:
    """The plan beside its graph in ``tmp_path`` (its ``instance.source`` pointed there) and its parsed JSON."""
    data = json.loads(plan.read_text())
    data["instance"]["source"] = str(plan.parent / "g.json")
    return tmp_path / "plan.json", data


def test_stages_of_different_degrees_run_four_sample_micro_batches(tmp_path: Path, mlp_plan: Path) -> None:
    # the mixed schedule: one replica's micro-batches of 4 samples scattered to two replicas (receive buffers of b)
    from milp_partition.run.launch import run_plan
    from milp_partition.run.spec import read_run_spec

    plan, data = _copy(mlp_plan, tmp_path)
    for st, d, y in zip(data["stages"], (1, 2), (3, 1)):
        st.update(data_parallel=d, microbatches_in_flight=y)
    plan.write_text(json.dumps(data))
    spec = read_run_spec(plan)
    assert spec.microbatch_size == 4 and spec.degrees == ((1, 1), (2, 1))
    run = run_plan(spec, 2)
    assert run["ranks"] == 3 and run["loss_max_rel_diff"] <= 1e-6


@pytest.mark.parametrize("size", [0, 1.5, "2", True])
def test_a_malformed_micro_batch_size_names_the_field(tmp_path: Path, mlp_plan: Path, size: object) -> None:
    from milp_partition.run.spec import read_run_spec

    plan, data = _copy(mlp_plan, tmp_path)
    data["instance"]["microbatch_size"] = size
    plan.write_text(json.dumps(data))
    with pytest.raises(InputError, match="positive whole number") as err:
        read_run_spec(plan)
    assert "instance.microbatch_size" in str(err.value)
