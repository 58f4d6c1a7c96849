"""``gap --executor ray`` on a real local Ray instance (2 CPUs): the same rows as the local executor."""

from __future__ import annotations

import csv

import pytest

ray = pytest.importorskip("ray")

from milp_partition.cli.dispatch import main  # noqa: E402

#: Columns that depend on the run, not on the answer.
TIMING = ("seconds",)


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
