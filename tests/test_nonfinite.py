"""No value that is not a finite number is ever verified, and every numeric flag and file field is checked for
finiteness and range on every path (issue 20 item 2)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from milp_partition.chain import Evaluation
from milp_partition.cluster import Link
from milp_partition.errors import InputError
from milp_partition.io.piper import joint_from_dict
from milp_partition.units import parse_bytes, parse_rate
from milp_partition.verifiers.joint import verify_joint
from milp_partition.verifiers.pipeline import verify_pipeline
from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import _tiny_piper


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "-5", "0", "1e999", "1e400GB/s", "nanGB/s"])
def test_a_rate_that_is_not_finite_and_positive_is_refused(text: str) -> None:
    with pytest.raises(InputError, match="--bandwidth"):
        parse_rate(text, "--bandwidth")


@pytest.mark.parametrize("text", ["nan", "inf", "1e999", "1e300GiB", "2PiB"])
def test_a_size_that_is_not_finite_or_too_large_is_refused(text: str) -> None:
    with pytest.raises(InputError, match="--memory"):
        parse_bytes(text, "--memory")


def test_bandwidth_flag_nan_is_refused_for_a_joint_file(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_tiny_piper()))
    for bad in ("nan", "inf", "-1", "0"):
        rc, _, err = run_cli(["solve", str(path), f"--bandwidth={bad}", "--progress", "0"])
        assert rc == 2 and "--bandwidth" in err, err
    rc, _, err = run_cli(["solve", str(path), "--microbatches", "10000000000", "--progress", "0"])
    assert rc == 2 and "--microbatches" in err


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("maxDevices", 10**400),
        ("maxDevices", 100_000),  # capped as --devices is
        ("maxMemoryPerDevice", 2**60),  # capped as --memory is (1 PiB)
        ("bandwidth", 1e308),
        ("mbsInBatch", 10**400),
        ("mbsInBatch", 10**12),
    ],
)
def test_piper_cluster_fields_are_capped_as_their_flags(tmp_path: Path, field: str, value: int | float) -> None:
    data = _tiny_piper() | {field: value}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    rc, _, err = run_cli(["solve", str(path), "--progress", "0"])
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "internal error" not in err, err


@pytest.mark.parametrize("value", [10**400, 1e308, 1e19])
def test_piper_configuration_numbers_beyond_range_are_refused(tmp_path: Path, value: int | float) -> None:
    data = _tiny_piper()
    data["nodes"][0]["TMPCs"]["1"][0]["timePerSample"] = value
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    rc, _, err = run_cli(["solve", str(path), "--progress", "0"])
    assert rc == 2 and "timePerSample" in err and "internal error" not in err, err


def test_the_joint_verifier_refuses_a_non_finite_value() -> None:
    problem = joint_from_dict(_tiny_piper(), "t")
    from milp_partition.joint.problem import JointPlan, JointStage

    plan = JointPlan((JointStage(("0", "1", "2"), 1, 1, {"0": "vanilla", "1": "vanilla", "2": "vanilla"}),))
    assert verify_joint(problem, plan).feasible
    for cl in (replace(problem.cluster, link=Link(0.0, math.nan)), problem.cluster.with_memory(math.nan)):
        rep = verify_joint(problem.with_cluster(cl), plan)
        assert not rep.feasible and any("not a finite number" in v for v in rep.violations)
    node = problem.nodes[0]
    cfg = replace(node.configs[1][0], time_per_sample_s=math.inf)
    bad = replace(problem, nodes=(replace(node, configs={**node.configs, 1: (cfg, *node.configs[1][1:])}), *problem.nodes[1:]))
    rep = verify_joint(bad, plan)
    assert not rep.feasible and math.isinf(rep.objective)


def test_the_pipeline_verifier_refuses_a_non_finite_value() -> None:
    from tests.conftest import random_pipeline_problem

    problem = random_pipeline_problem(3)
    from milp_partition.pipeline.problem import PipelineSolution

    first = problem.cluster.devices[0].id
    solution = PipelineSolution({n.id: first for n in problem.graph.nodes})
    nodes = tuple(replace(n, forward_time=math.nan) if k == 0 else n for k, n in enumerate(problem.graph.nodes))
    bad = replace(problem, graph=replace(problem.graph, nodes=nodes))
    rep = verify_pipeline(bad, solution)
    assert not rep.feasible


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_the_chain_never_verifies_a_non_finite_value(value: float) -> None:
    ev = Evaluation(True, value)
    assert not ev.feasible and "not a finite number" in ev.violations[-1]
    assert Evaluation(True, 1.5).feasible
