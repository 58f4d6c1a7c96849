"""``gap --executor ray`` on a real local Ray instance (2 CPUs): the same rows as the local executor."""

from __future__ import annotations

import csv

import pytest

ray = pytest.importorskip("ray")

from milp_partition.cli.dispatch import main  # noqa: E402

#: Columns that depend on the run, not on the answer.
#: Fields that depend on the machine's speed: the time, and the message naming which step proved the answer (on a
#: loaded machine placement's quick CP-SAT solve may prove what the main path proves on a quiet one).  The status,
#: value and bound are compared.
TIMING = ("seconds", "message")


def _rows(path):
    with path.open(newline="") as f:
        return sorted(
            ({k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(f)),
            key=lambda r: (r["problem"], r["instance"], r["point"], r["method"]),
        )


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_rows_equal_local_rows(shared_benchmarks, local_ray, tmp_path, capsys):
    files = [
        shared_benchmarks / "placement" / "example-1.json",
        shared_benchmarks / "strategy" / "rnnlm_p8.json",
        shared_benchmarks / "pipeline" / "LayerGraphs" / "bert24_inference.json",
    ]
    common = [*map(str, files), "--devices", "3,8", "--time-limit", "30", "--no-charts"]
    assert main(["gap", *common, "--output-dir", str(tmp_path / "local"), "--jobs", "2"]) == 0
    assert main(["gap", *common, "--output-dir", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    err = capsys.readouterr().err
    assert "failed 0" in err
    local, remote = _rows(tmp_path / "local" / "gap.csv"), _rows(tmp_path / "ray" / "gap.csv")
    # placement 6 + strategy at p = 8 only 5 + pipeline at 3 and 8 devices 2 x 5
    assert len(local) == 6 + 5 + 10
    failed = {(r["problem"], r["method"]) for r in local if r["status"] not in ("feasible", "optimal")}
    assert failed == {("strategy", "lagrangian")}  # it needs a memory limit to relax
    assert remote == local
    assert ray.is_initialized()  # the sweep used the running instance and left it running


def test_ray_run_that_raises_is_an_error_row(local_ray, tmp_path):
    from milp_partition.sweep.executors import ExecutorSettings, Progress, run_jobs
    from milp_partition.sweep.jobs import GapJob

    jobs = [GapJob("placement", str(tmp_path / "gone.json"), "gone", "0", (), "heft")]
    rows = list(run_jobs(jobs, ExecutorSettings("ray"), Progress(1, enabled=False)))
    assert len(rows) == 1 and rows[0]["status"] == "error" and "gone.json" in rows[0]["message"]


def test_ray_worker_that_dies_is_an_error_row_and_the_other_rows_are_intact(shared_benchmarks, local_ray):
    """One run kills its Ray worker (``os._exit``): that run is an error row; the others' rows equal the in-process ones."""
    import os

    from milp_partition.sweep.executors import ExecutorSettings, Progress, run_jobs
    from milp_partition.sweep.jobs import GapJob
    from milp_partition.sweep.registry import execute

    def runner(job):  # defined here, so Ray ships it by value to the workers
        if job.method == "heft" and job.instance == "die":
            os._exit(7)
        return execute(job)

    path = str(shared_benchmarks / "placement" / "example-1.json")
    jobs = [GapJob("placement", path, "die", "0", (), "heft")]
    jobs += [GapJob("placement", path, "example-1", "0", (), m) for m in ("heft", "m-topo", "m-etf")]
    rows = list(run_jobs(jobs, ExecutorSettings("ray"), Progress(len(jobs), enabled=False), runner=runner))
    assert len(rows) == len(jobs)
    by = {(r["instance"], r["method"]): r for r in rows}
    dead = by["die", "heft"]
    assert dead["status"] == "error" and "Ray" in dead["message"] and "died" in dead["message"]  # WorkerCrashedError
    for job in jobs[1:]:  # the other runs are intact: the same rows as running them here (times aside)
        got, want = by[job.instance, job.method], execute(job)
        assert {k: v for k, v in got.items() if k not in TIMING} == {k: v for k, v in want.items() if k not in TIMING}
        assert got["status"] == "feasible" and float(got["value"]) >= 30.0  # example-1's optimum is 30


def test_ray_rows_equal_local_rows_on_joint_instances(local_ray, tmp_path):
    """The joint problem's baselines and exact solve on Ray: the same rows as the local executor."""
    from milp_partition.io.piper import write_joint
    from tests.test_joint_bruteforce import random_problem

    files = []
    for seed in (0, 3, 9):
        write_joint(random_problem(seed), tmp_path / f"tiny{seed}.json")
        files.append(str(tmp_path / f"tiny{seed}.json"))
    common = [*files, "--problem", "joint", "--devices", "2,4", "--time-limit", "30", "--no-charts", "--quiet"]
    assert main(["gap", *common, "--output-dir", str(tmp_path / "local")]) == 0
    assert main(["gap", *common, "--output-dir", str(tmp_path / "ray"), "--executor", "ray"]) == 0
    local, remote = _rows(tmp_path / "local" / "gap.csv"), _rows(tmp_path / "ray" / "gap.csv")
    assert len(local) == 3 * 2 * 4 and {r["problem"] for r in local} == {"joint"}
    assert any(r["status"] == "optimal" for r in local) and not any(r["status"] == "error" for r in local)
    assert remote == local
