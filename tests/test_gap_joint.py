"""``gap`` on the joint problem: rows against brute force and direct calls of the baselines and the verifier; Piper's file."""

from __future__ import annotations

import csv
import math

import pytest
from milp_partition.heuristics.joint_baselines import all_data_parallel, pipedream_2bw_style, piper_style

from milp_partition.cli.dispatch import main
from milp_partition.io.piper import read_joint, write_joint
from milp_partition.joint import gap as joint_gap
from milp_partition.joint.dp import joint_data
from milp_partition.sweep.jobs import EXACT, GapJob
from milp_partition.sweep.registry import execute
from milp_partition.units import parse_bytes, parse_rate
from milp_partition.verifiers.joint import verify_joint
from tests.test_joint_bruteforce import brute_force, random_problem

# Piper's planner on bert32a100.json, k = 8, 8 GiB, 25 GiB/s (../shared/benchmarks/README.md, joint/); 1 GiB: infeasible
BERT_K8_8GIB = 0.16585575


def _rows(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("seed", [s for s in range(40) if s % 3 == 0])
def test_rows_of_tiny_instances_against_brute_force_and_direct_calls(seed, tmp_path):
    problem = random_problem(seed)
    path = tmp_path / f"tiny{seed}.json"
    write_joint(problem, path)
    assert joint_gap.recognize(path) is None
    optimum = brute_force(problem)
    rows = {
        m: execute(GapJob("joint", str(path), path.stem, "x", (), m, time_limit_s=60)) for m in (*joint_gap.HEURISTICS, EXACT)
    }
    exact = rows[EXACT]
    if math.isinf(optimum):
        assert exact["status"] == "infeasible" and exact["value"] == ""
        assert all(rows[m]["status"] == "failed" for m in joint_gap.HEURISTICS)
        return
    assert exact["status"] == "optimal"
    assert float(exact["value"]) == pytest.approx(optimum, rel=1e-9, abs=1e-12)
    assert float(exact["bound"]) <= float(exact["value"]) * (1 + 1e-12)
    data = joint_data(read_joint(path))
    direct = {
        "piper-style": piper_style(data)[0],
        "pipedream-2bw": pipedream_2bw_style(data)[0],
        "all-data-parallel": all_data_parallel(data)[0],
    }
    for m, plan in direct.items():
        row = rows[m]
        assert row["size"] == str(len(problem.nodes)) and row["unit"] == "s"
        if plan is None:
            assert row["status"] == "failed" and row["value"] == ""
            continue
        report = verify_joint(problem, plan)
        assert report.feasible and row["status"] == "feasible"
        assert float(row["value"]) == report.objective  # the CSV value is the verifier's, to the last bit
        assert report.objective >= optimum * (1 - 1e-9)


def test_grid_overrides_the_files_cluster(tmp_path):
    problem = random_problem(4)
    path = tmp_path / "tiny.json"
    write_joint(problem, path)
    point = (("devices", "3"), ("memory", "1KiB"), ("micro_batches", "6"), ("bandwidth", "2GiB/s"))
    loaded = joint_gap.load(path, point, {})
    cl = loaded.cluster
    assert (cl.device_count, cl.memory_bytes, loaded.microbatches) == (3, 1024.0, 6)
    assert cl.bandwidth_bytes_per_s == parse_rate("2GiB/s", "x") == 2 * 2**30
    assert joint_gap.load(path, (), {}).cluster == problem.cluster  # no axis swept: the file's cluster


def test_gap_on_piper_bert(shared_benchmarks, tmp_path, capsys):
    """Piper's BERT-32 at k = 8: 8 GiB (Piper's value is the optimum) and 1 GiB (no plan); other files skipped."""
    bert = shared_benchmarks / "joint" / "bert32a100.json"
    other = shared_benchmarks / "placement" / "example-1.json"
    out = tmp_path / "res"
    argv = ["gap", str(bert), str(other), "--problem", "joint", "--devices", "8", "--memory", "1GiB,8GiB",
            "--bandwidth", "25GiB/s", "--time-limit", "60", "--output-dir", str(out), "--no-charts"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "warning: skipping" in err and "example-1.json" in err and "failed 0" in err
    rows = _rows(out / "gap.csv")
    assert len(rows) == 2 * 4 and {r["problem"] for r in rows} == {"joint"}
    by = {(r["point"], r["method"]): r for r in rows}
    big, small = "devices=8;memory=8GiB;bandwidth=25GiB/s", "devices=8;memory=1GiB;bandwidth=25GiB/s"
    assert by[big, EXACT]["status"] == "optimal"
    assert float(by[big, EXACT]["value"]) == pytest.approx(BERT_K8_8GIB, rel=1e-7)
    assert float(by[big, "piper-style"]["value"]) == pytest.approx(BERT_K8_8GIB, rel=1e-7)
    for m in ("pipedream-2bw", "all-data-parallel"):  # verified, and no better than the proven bound
        assert by[big, m]["status"] == "feasible"
        assert float(by[big, m]["value"]) > float(by[big, EXACT]["bound"])
    assert by[small, EXACT]["status"] == "infeasible"
    assert all(by[small, m]["status"] == "failed" for m in joint_gap.HEURISTICS)
    # the row of a baseline equals the verifier on the baseline's plan at that point
    problem = read_joint(bert, devices=8, memory_bytes=float(parse_bytes("8GiB", "m")),
                         bandwidth_bytes_per_s=parse_rate("25GiB/s", "b"))  # fmt: skip
    plan, _ = pipedream_2bw_style(joint_data(problem))
    assert plan is not None and float(by[big, "pipedream-2bw"]["value"]) == verify_joint(problem, plan).objective
    md = (out / "gap.md").read_text()
    assert "## joint" in md and f"### joint: bert32a100 [{big}]" in md
