"""The joint problem through the CLI: solve (Piper's format detected), the result JSON, evaluate, info."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_joint_io import JOINT, needs_shared, tiny

from milp_partition.cli import main
from milp_partition.io.piper import joint_from_dict
from milp_partition.joint.problem import JointSolveSettings
from milp_partition.joint.schedule import JointSchedule
from milp_partition.joint.solve import solve_joint


@pytest.fixture
def tiny_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(tiny()))
    return path


def test_solve_detects_piper_and_writes_stages(tiny_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.json"
    assert main(["solve", str(tiny_file), "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "OPTIMAL" in text and "stage" in text
    r = json.loads(out.read_text())
    for key in ("status", "objective", "bound", "gap", "solve_seconds", "solver", "stages"):
        assert key in r
    # one stage on both devices (worked by hand in test_joint_verifier): 1.5 + 0.8
    assert r["status"] == "optimal" and r["objective"] == pytest.approx(2.3)
    assert r["bound"] <= r["objective"]
    assert r["stages"] == [
        {
            "nodes": ["0", "1"],
            "data_parallel": 2,
            "tensor_parallel": 1,
            "configs": {"0": "vanilla", "1": "vanilla"},
            "time_per_sample_s": pytest.approx(2.3),
            "devices": 2,
            "memory_bytes": 6.0,
            "microbatches_in_flight": 1,
        }
    ]
    # evaluate reads the result back and agrees
    assert main(["evaluate", str(tiny_file), str(out)]) == 0
    assert "time_per_sample = 2.3" in capsys.readouterr().out


def test_cluster_flags_override_the_file(tiny_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    # one device: one stage d = 1 vanilla: 3 s per sample; memory 3 + 3
    assert main(["solve", str(tiny_file), "--problem", "joint", "--devices", "1", "--memory", "6B", "-q", "-o", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["objective"] == pytest.approx(3.0) and r["status"] == "optimal"
    # bandwidth: the all-reduce of d = 2 costs 8 bytes / B
    assert main(["solve", str(tiny_file), "--bandwidth", "80B/s", "-q", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["objective"] == pytest.approx(1.5 + 0.1)


def test_infeasible_exits_3(tiny_file: Path, capsys) -> None:
    assert main(["solve", str(tiny_file), "--memory", "4B"]) == 3  # one stage needs 6; two: the first holds y = 2 (5)
    assert "INFEASIBLE" in capsys.readouterr().out


def test_evaluate_rejects_a_bad_plan(tiny_file: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text(
        json.dumps({"stages": [{"nodes": ["1"], "data_parallel": 1, "tensor_parallel": 1, "configs": {"1": "vanilla"}}]})
    )
    assert main(["evaluate", str(tiny_file), str(bad)]) == 2  # a node left out is bad input (issue 43), not infeasible
    assert "node '0' is in no stage" in capsys.readouterr().err
    bad.write_text(json.dumps({"stages": [{"nodes": ["1"]}]}))
    assert main(["evaluate", str(tiny_file), str(bad)]) == 2
    both = {"nodes": ["0", "1"], "data_parallel": 2, "tensor_parallel": 1, "configs": {"0": "vanilla", "1": "vanilla"}}
    bad.write_text(json.dumps({"stages": [both]}))  # the optimal plan (memory 6 bytes) on 5 bytes: well-formed, infeasible
    assert main(["evaluate", str(tiny_file), str(bad), "--memory", "5B"]) == 3
    assert "INFEASIBLE plan" in capsys.readouterr().out


@needs_shared
def test_info_on_piper_file(capsys) -> None:
    assert main(["info", str(JOINT / "gnmt.json")]) == 0
    out = capsys.readouterr().out
    assert "78 nodes, 104 edges" in out and "10 devices" in out and "N = 256" in out


def test_no_time_reports_the_baselines_plan_and_a_proven_bound() -> None:
    """With no time for the exact search the best baseline plan is reported as feasible with the work bound."""
    problem = joint_from_dict(tiny(), "tiny")
    r = solve_joint(problem, JointSolveSettings(time_limit_s=0.0, baselines=False))
    assert r.status == "feasible" and r.objective == pytest.approx(2.3)  # all-data-parallel on 2 devices is optimal here
    assert r.bound == pytest.approx(1.5)  # (1 + 2) / 2: sum of least t p over k
    assert r.gap == pytest.approx((2.3 - 1.5) / 2.3)
    assert r.stages and "time limit" in r.message


def test_too_many_ideals_still_runs_the_cheap_baselines() -> None:
    """Issue 20 item 15: past --max-ideals the cheap baselines were skipped (they need only a topological order's
    prefixes); the exact search still does not run on that partial index (the DP along orders and the segment and
    column bounds, the wide-graph path, run instead: here the column bound proves the plan optimal)."""
    r = solve_joint(joint_from_dict(tiny(), "tiny"), JointSolveSettings(max_ideals=1, solver="none"))
    assert "too_many_ideals" in r.solver_notes
    assert r.objective == pytest.approx(2.3)
    names = ["all-data-parallel", "pipedream-2bw", "order-dp", "polish", "segment-bound", "column-bound"]
    assert [h.name for h in r.heuristics] == names
    assert r.solver_notes["segment_bound"] < 2.3 * (1 - 1e-4)  # the segment bound alone does not prove it
    assert r.status == "optimal" and 2.3 * (1 - 1e-6) <= r.bound <= 2.3  # within the chain's proof tolerance


def test_the_search_refuses_a_partial_index() -> None:
    from milp_partition.joint.dp import joint_data, search

    data = joint_data(joint_from_dict(tiny(), "tiny"), prefixes_only=True)
    with pytest.raises(ValueError, match="every ideal"):
        search(data)


def test_max_ideals_is_a_joint_flag(tmp_path: Path, capsys) -> None:
    """The advice 'raise --max-ideals' named a flag the joint problem refused."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(tiny()))
    assert main(["solve", str(path), "--max-ideals", "1", "--solver", "none", "-q", "--progress", "0"]) == 0
    assert "objective=2.3 " in capsys.readouterr().out  # the wide path's plan (the stage bound proves it optimal)


def test_too_many_ideals_goes_to_the_milp() -> None:
    problem = joint_from_dict(tiny(), "tiny")
    r = solve_joint(
        problem, JointSolveSettings(max_ideals=1, schedule=JointSchedule().capped(segment_bound=0, stage_bound=0, column_bound=0))
    )  # no bounds: the MILP proves it
    dp = solve_joint(problem, JointSolveSettings())
    assert r.solver == "joint-milp/cpsat" and dp.solver == "joint-dp"
    assert r.status == dp.status == "optimal" and r.objective == pytest.approx(dp.objective, rel=1e-9)
