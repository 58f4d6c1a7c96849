"""``gap`` over every problem: grid, skipped files, verified values against known optima, resume, merge, errors."""

from __future__ import annotations

import csv
import json
import math

import pytest
from milp_partition.heuristics.pipeline_simple import equal_split, greedy_fill

from milp_partition.cli.dispatch import main
from milp_partition.sweep.executors import ExecutorSettings, Progress, run_jobs
from milp_partition.sweep.grid import Grid, parse_grid
from milp_partition.sweep.jobs import EXACT, GapJob, code_fingerprint, latest_rows
from milp_partition.sweep.registry import execute
from milp_partition.verifiers.pipeline import verify_pipeline
from tests.brute_force import brute_force_pipeline
from tests.conftest import random_pipeline_problem

# known optima (../shared/benchmarks/README.md)
BERT24_INFERENCE = 17.78990625
ALEXNET_P4 = 148215719552
EXAMPLE_1 = 30.0


def _rows(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_grid_points_keep_only_the_axes_a_problem_has():
    grid = parse_grid("4,8", "8GiB", "2", "static,1f1b,liveness")
    pipeline = grid.points({"devices": None, "memory": None, "memory_model": ("static", "1f1b")})
    assert len(pipeline) == 4 and (("devices", "8"), ("memory", "8GiB"), ("memory_model", "1f1b")) in pipeline
    placement = grid.points({"memory_model": ("static", "liveness")})
    assert placement == [(("memory_model", "static"),), (("memory_model", "liveness"),)]
    assert Grid().points({"devices": None}) == [()]
    assert Grid(memory_model=("1f1b",)).points({"memory_model": ("static", "liveness")}) == [()]


def test_grid_rejects_bad_values(capsys, tmp_path):
    assert main(["gap", "x.json", "--devices", "4,a", "--output-dir", str(tmp_path)]) == 2
    assert "--devices" in capsys.readouterr().err
    assert main(["gap", "x.json", "--memory", "lots", "--output-dir", str(tmp_path)]) == 2
    assert "cannot read 'lots' as a size" in capsys.readouterr().err


@pytest.mark.parametrize("seed", range(16))
def test_pipeline_baselines_are_verified_and_no_better_than_brute_force(seed):
    problem = random_pipeline_problem(seed, max_nodes=7, backward=seed % 2 == 1, cpu_cores=int(seed % 3 == 0))
    optimum = brute_force_pipeline(problem)
    for fn in (equal_split, greedy_fill):
        report = verify_pipeline(problem, fn(problem))
        if report.feasible:  # memory may bind: equal split ignores it, greedy may run out of devices
            assert report.objective >= optimum * (1 - 1e-9)
        else:
            assert any("memory" in v for v in report.violations)


def test_gap_over_three_problems(shared_benchmarks, tmp_path, capsys):
    out = tmp_path / "res"
    files = [
        shared_benchmarks / "placement" / "example-1.json",
        shared_benchmarks / "placement" / "reference.json",  # not an instance: skipped with a warning
        shared_benchmarks / "strategy" / "alexnet_p4.json",
        shared_benchmarks / "strategy" / "alexnet_p8.json",  # p = 8: no grid point applies (devices 4)
        shared_benchmarks / "pipeline" / "LayerGraphs" / "bert24_inference.json",
    ]
    argv = ["gap", *map(str, files), "--devices", "4", "--time-limit", "30", "--output-dir", str(out), "--no-charts"]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert "warning: skipping" in first.err and "reference.json" in first.err and "alexnet_p8.json" in first.err
    assert "done 16/16" in first.err and "failed 0" in first.err  # progress
    rows = _rows(out / "gap.csv")
    assert len(rows) == 6 + 5 + 5  # placement 5 heuristics + exact; strategy 4 + exact; pipeline 4 + exact
    by = {(r["problem"], r["method"]): r for r in rows}
    assert float(by["placement", EXACT]["value"]) == pytest.approx(EXAMPLE_1)
    assert by["strategy", EXACT]["status"] == "optimal"
    assert float(by["strategy", EXACT]["value"]) == pytest.approx(ALEXNET_P4, rel=1e-9)
    assert float(by["strategy", "pase-dp"]["value"]) == pytest.approx(ALEXNET_P4, rel=1e-9)  # PaSE's DP is exact here
    assert by["pipeline", EXACT]["point"] == "devices=4"
    pipeline_opt = float(by["pipeline", EXACT]["value"])
    assert by["pipeline", EXACT]["status"] == "optimal" and pipeline_opt > BERT24_INFERENCE  # 4 accelerators, not 6
    for (problem, method), r in by.items():
        if method != EXACT and r["status"] == "feasible":
            assert float(r["value"]) >= float(by[problem, EXACT]["bound"]) * (1 - 1e-9), (problem, method)
    md = (out / "gap.md").read_text()
    assert "## pipeline" in md and "## strategy" in md and "## placement" in md
    assert "### pipeline: bert24_inference [devices=4]" in md

    assert main(argv) == 0  # resume: nothing left
    assert "0 run(s), 16 skipped" in capsys.readouterr().out


def test_stale_rows_are_rerun_and_partial_sweeps_merge(shared_benchmarks, tmp_path, capsys):
    ex1 = str(shared_benchmarks / "placement" / "example-1.json")
    rnn = str(shared_benchmarks / "strategy" / "rnnlm_p8.json")
    common = ["--no-exact", "--output-dir", str(tmp_path), "--name", "m", "--no-charts", "--quiet"]
    assert main(["gap", ex1, "--heuristics", "heft,m-topo", *common]) == 0
    path = tmp_path / "m.csv"
    rows = _rows(path)
    assert len(rows) == 3
    # pretend a row came from older code with another value: it is run again and replaced
    rows[0]["code"], rows[0]["value"] = "000000000000", "1.0"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert main(["gap", ex1, "--heuristics", "heft,m-topo", *common]) == 0
    assert "1 run(s), 2 skipped" in capsys.readouterr().out
    rows = _rows(path)
    assert len(rows) == 3 and all(r["code"] == code_fingerprint() for r in rows)
    assert float(next(r for r in rows if r["method"] == "heft")["value"]) == 38.0
    # a sweep of another instance adds its rows; the first sweep's stay
    assert main(["gap", rnn, "--heuristics", "pase-dp", *common]) == 0
    rows = _rows(path)
    assert {r["instance"] for r in rows} == {"example-1", "rnnlm_p8"} and len(rows) == 4
    md = (tmp_path / "m.md").read_text()
    assert "### placement: example-1" in md and "### strategy: rnnlm_p8" in md


def test_latest_rows_keeps_the_last_of_each_key():
    a = dict.fromkeys(("problem", "instance", "sha", "point", "method", "options"), "x") | {"value": "1"}
    b = a | {"value": "2"}
    c = a | {"method": "y"}
    assert latest_rows([a, c, b]) == [b, c]


def test_a_run_that_raises_is_an_error_row():
    job = GapJob("placement", "/nonexistent.json", "nonexistent", "0", (), "heft", code="c")
    row = execute(job)
    assert row["status"] == "error" and "nonexistent.json" in row["message"] and row["method"] == "heft"


def test_a_worker_that_dies_is_an_error_row(shared_benchmarks, tmp_path, monkeypatch):
    """A fake problem whose run kills its worker process: the local executor records an error row, the other rows are intact."""
    (tmp_path / "crash_gap.py").write_text(
        "import os, time\n"
        "def run(job):\n"
        "    if job.method == 'die':\n"
        "        os._exit(3)\n"
        "    time.sleep(0.2)  # still running or queued when the other worker dies (the rows must not depend on it)\n"
        "    return job.row(status='feasible', value=1.0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from milp_partition import registry

    monkeypatch.setitem(registry.PROBLEMS, "crash", registry.ProblemEntry("crash", "-", "-", "-", gap="crash_gap"))
    jobs = [GapJob("crash", "f", "f", "0", (), "die")] + [GapJob("crash", f"g{i}", f"g{i}", "0", (), "ok") for i in range(4)]
    rows = list(run_jobs(jobs, ExecutorSettings("local", workers=2), Progress(len(jobs), enabled=False)))
    assert len(rows) == len(jobs)
    die = next(r for r in rows if r["method"] == "die")
    assert die["status"] == "error" and "died" in die["message"]
    # the broken pool's other jobs ran again, each alone: their rows are intact, not errors
    ok = sorted((r["instance"], r["status"], r["value"]) for r in rows if r["method"] == "ok")
    assert ok == [(f"g{i}", "feasible", "1.0") for i in range(4)]


def test_heuristic_values_are_the_verifiers(shared_benchmarks, tmp_path):
    """Re-evaluate one strategy heuristic's choice independently: the CSV value is the verifier's objective."""
    from milp_partition.io.strategy_tables import read_strategy_tables
    from milp_partition.strategy.gap import data_parallel
    from milp_partition.verifiers.strategy import verify_strategy

    path = shared_benchmarks / "strategy" / "alexnet_p4.json"
    row = execute(GapJob("strategy", str(path), "alexnet_p4", "x", (), "data-parallel"))
    problem = read_strategy_tables(path)
    choice = data_parallel(problem)
    assert all(c.startswith("4x") and set(c[2:].replace("x", "")) <= {"1"} for c in choice.choice.values())
    assert float(row["value"]) == verify_strategy(problem, choice).objective
    assert float(row["value"]) > ALEXNET_P4  # data parallelism everywhere is not PaSE's optimum here
    assert math.isfinite(float(row["seconds"]))
    assert json.loads(json.dumps(row)) == row


def test_a_graph_without_cluster_needs_devices(shared_benchmarks, tmp_path, capsys):
    profile = str(shared_benchmarks / "pipedream" / "alexnet.txt")
    assert main(["gap", profile, "--no-exact", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "alexnet.txt" in err and "--devices" in err and "Traceback" not in err
    assert not (tmp_path / "gap.csv").exists()  # bad input stops the sweep before any run
    assert main(["gap", profile, "--no-exact", "--devices", "2", "--output-dir", str(tmp_path), "--quiet", "--no-charts"]) == 0
    rows = _rows(tmp_path / "gap.csv")
    assert {r["method"] for r in rows} == {"chain-dp", "ideal-dp", "equal-split", "greedy"}
    assert {r["point"] for r in rows} == {"devices=2"}


def test_compacting_the_gap_table_keeps_its_permissions(tmp_path) -> None:
    """Issue 43 item 11: ``gap.csv`` was rewritten through a bare temporary file, with permissions 0600."""
    import os
    import stat

    from milp_partition.sweep.jobs import CSV_FIELDS, compact

    path = tmp_path / "gap.csv"
    path.write_text(",".join(CSV_FIELDS) + "\r\n")
    os.chmod(path, 0o644)
    compact(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    fresh = tmp_path / "new.csv"
    fresh.write_text(",".join(CSV_FIELDS) + "\r\n")
    os.chmod(fresh, 0o664)
    compact(fresh)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o664
