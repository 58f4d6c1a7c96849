"""Tensor parallelism in the run objective: the degrees run can split an imported model at (joint/run_split.py), the
split's price (costmodel/tensor.py) in the DP and the verifier, and ``solve --objective run --tensor-parallel T``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")

from milp_partition.calibration.torch_ops import OperatorCoefficients
from milp_partition.cli.dispatch import main
from milp_partition.costmodel.plan import RunCoefficients, RunPlan, RunShape
from milp_partition.costmodel.tensor import TensorParallelCoefficients
from milp_partition.importers.timing import load_profile_spec
from milp_partition.io.imported_layers import read_layers
from milp_partition.joint.run_dp import solve_run_dp
from milp_partition.joint.run_layers import run_problem_from_imported
from milp_partition.joint.run_split import offered_degrees
from milp_partition.verifiers.joint_run import verify_run_plan

# fixed coefficients (not measured: the test must not depend on this machine's speed)
OPS = OperatorCoefficients(forward_overhead_s=1e-5, backward_overhead_s=2e-5, matmul_flops_per_s=5e10, memory_s_per_byte=1e-10)
COEFFS = RunCoefficients(
    p2p_alpha_s=1e-4,
    p2p_beta_s_per_byte=1e-9,
    allreduce_alpha_s=2e-4,
    allreduce_beta_s_per_byte=1e-9,
    tensor=TensorParallelCoefficients(dtensor_module_s=1e-4, dtensor_optimizer_tensor_s=1e-5),
)


def _import(tmp_path_factory: pytest.TempPathFactory, factory: str, shape: str) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("tp") / f"{factory}.json"
    args = ["import", "torch", f"milp_partition.importers.models:{factory}", "--input", shape, "--training"]
    assert main([*args, "--granularity", "layer", "-o", str(out)]) == 0
    return out, json.loads(out.read_text())


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    return _import(tmp_path_factory, "gpt_small_test", "2x32:int64")


def _splits(data: dict, degrees: list[int]) -> tuple[dict, dict]:
    model = read_layers(data, "gpt.json")
    return offered_degrees(model, degrees, load_profile_spec(model.profile or "H100"))


def test_degrees_run_can_split_and_why_not(gpt: tuple[Path, dict]) -> None:
    """GPT-small's 4 heads split over 2 and 4 ranks, not 3; at t = 2 each block splits its QKV / projection and MLP pairs
    (four modules, a forward and a backward all-reduce each pair), each rank holds between half and all of the weights."""
    _, data = gpt
    splits, refused = _splits(data, [2, 3, 4])
    assert sorted(splits) == [2, 4] and "not divisible by 3" in refused[3]
    model = read_layers(data, "gpt.json")
    total = sum(op.param_bytes for _, ops in model.layers.values() for op in ops)
    for t, by_node in splits.items():
        per_rank = sum(s.param_bytes for s in by_node.values())
        assert total / t < per_rank < total
        block = by_node["h.0"]
        assert block.split_modules == 4 and block.split_tensors == 8
        assert len(block.allreduce_forward_bytes_per_sample) == 2 == len(block.allreduce_backward_bytes_per_sample)
        assert 0.5 < block.split_share <= 1.0
        assert by_node["ln_f"].split_modules == 0 and by_node["ln_f"].split_share == 0.0
    assert splits[4]["h.0"].param_bytes < splits[2]["h.0"].param_bytes


def test_a_forced_degree_is_planned_and_verified(gpt: tuple[Path, dict]) -> None:
    """The DP's plan at t = 2 passes the verifier at the DP's price; dearer DTensor hooks make it dearer by exactly the
    hooks of its split modules (forward and backward, per micro-batch)."""
    _, data = gpt
    splits, _ = _splits(data, [2])
    args = dict(devices=2, memory_bytes=1 << 30, global_batch=8, sizes=(1, 2, 4, 8), operators=OPS, splits=splits)
    problem = run_problem_from_imported(data, "gpt.json", coefficients=COEFFS, shape=RunShape(tensor_parallel=2), **args)
    assert problem.tensor_degrees == (1, 2)
    got = solve_run_dp(problem)
    assert got.complete and got.plan is not None and got.plan.tensor_parallel == 2
    report = verify_run_plan(problem, got.plan)
    assert report.feasible and report.step_s == pytest.approx(got.step_s, rel=1e-9)
    dear = replace(COEFFS, tensor=TensorParallelCoefficients(dtensor_module_s=1e-3, dtensor_optimizer_tensor_s=1e-5))
    costly = run_problem_from_imported(data, "gpt.json", coefficients=dear, shape=RunShape(tensor_parallel=2), **args)
    modules = sum(s.split_modules for s in splits[2].values())
    passes = got.plan.microbatches + len(got.plan.stages) - 1  # one stage: m micro-batches through it
    assert verify_run_plan(costly, got.plan).step_s == pytest.approx(report.step_s + passes * modules * 9e-4, rel=1e-9)
    one = run_problem_from_imported(data, "gpt.json", coefficients=COEFFS, shape=RunShape(1, 1, 1), **args)
    plain = verify_run_plan(one, RunPlan(((0, len(one.layers)),), 1, 1))
    split = verify_run_plan(one, RunPlan(((0, len(one.layers)),), 1, 1, frozenset(), 2))
    assert split.memory[0].weights_bytes < plain.memory[0].weights_bytes  # each rank holds its share


def test_cli_forces_a_degree_and_run_reads_its_step(
    gpt: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--tensor-parallel 2`` writes stages of degree 2 whose planned step run.json reports (planner_step_s); a degree
    run cannot split the model at exits 2 naming why."""
    from milp_partition.run.spec import read_run_spec

    path, _ = gpt
    coeffs = tmp_path / "ops.json"
    coeffs.write_text(
        json.dumps(
            {
                **{k: getattr(OPS, k) for k in OPS.__dataclass_fields__},
                "dtensor_module_s": 1e-4,
                "dtensor_optimizer_tensor_s": 1e-5,
            }
        )
    )
    common = ["solve", str(path), "--problem", "joint", "--objective", "run", "--devices", "2", "--memory", "1GiB"]
    common += ["--global-batch", "8", "--coefficients", str(coeffs)]
    out = tmp_path / "plan.json"
    assert (
        main([*common, "--tensor-parallel", "2", "--stages", "1", "--data-parallel", "1", "--microbatches", "2", "-o", str(out)])
        == 0
    )
    plan = json.loads(out.read_text())
    assert plan["status"] == "optimal" and [st["tensor_parallel"] for st in plan["stages"]] == [2]
    assert plan["instance"]["microbatches"] == 2 and plan["instance"]["microbatch_size"] == 4
    assert read_run_spec(out, str(path)).predicted_step_s == pytest.approx(plan["objective"], rel=1e-12)
    assert "x t = 2" in capsys.readouterr().out
    assert main([*common, "--tensor-parallel", "3"]) == 2
    assert "not divisible by 3" in capsys.readouterr().err
    free = tmp_path / "free.json"
    assert main([*common, "--tp-degrees", "1", "-o", str(free)]) == 0  # t = 1 only: every stage at degree 1
    assert all(st["tensor_parallel"] == 1 for st in json.loads(free.read_text())["stages"])
