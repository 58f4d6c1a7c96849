"""The ``gap`` command end to end: tables written, resume skips done runs, bad input gets a clear error."""

from __future__ import annotations

import csv

import pytest

from milp_partition.cli.dispatch import main
from milp_partition.io.placement_instance import write_placement_instance
from milp_partition.placement.generators import DeviceSetSettings, PlacementGeneratorSettings, generate_placement_problem


def _rows(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def tiny_instance(tmp_path):
    problem = generate_placement_problem(
        PlacementGeneratorSettings(
            kind="inception", num_tasks=9, seed=2, devices=DeviceSetSettings(num_devices=2, memory_slack=1.3)
        )
    )
    path = tmp_path / "tiny.json"
    write_placement_instance(problem, path)
    return path


def test_gap_end_to_end_and_resume(shared_benchmarks, tiny_instance, tmp_path, capsys):
    out = tmp_path / "res"
    argv = ["gap", str(shared_benchmarks / "placement" / "example-1.json"), str(tiny_instance),
            "--time-limit", "20", "--output-dir", str(out), "--name", "g"]  # fmt: skip
    assert main(argv) == 0
    first = capsys.readouterr()
    assert "12 run(s), 0 skipped" in first.out
    assert "done 12/12" in first.err  # the progress line
    rows = _rows(out / "g.csv")
    assert len(rows) == 12
    by = {(r["instance"], r["method"]): r for r in rows}
    exact = by[("example-1", "exact")]
    assert exact["status"] == "optimal" and float(exact["value"]) == pytest.approx(30.0)
    for name in ("heft", "m-topo", "m-etf", "pardnn", "heft-iter"):
        for inst in ("example-1", "tiny"):
            r = by[(inst, name)]
            assert r["status"] == "feasible"
            assert float(r["value"]) >= float(by[(inst, "exact")]["bound"]) * (1 - 1e-9)
    md = (out / "g.md").read_text()
    assert (
        "### placement: example-1" in md
        and "### placement: tiny" in md
        and "| heft | feasible |" in md
        and "written by milp_partition/sweep/markdown.py" in md
    )

    assert main(argv) == 0  # resume: nothing left to run
    second = capsys.readouterr()
    assert "0 run(s), 12 skipped" in second.out
    assert _rows(out / "g.csv") == rows
    assert (out / "g_gap.png").stat().st_size > 0 and (out / "g_time.png").stat().st_size > 0

    # another setting is a different sweep; --no-exact reports the cheap bounds
    assert (
        main(
            [
                *argv[:3],
                "--heuristics",
                "heft",
                "--no-exact",
                "--link-contention",
                "--output-dir",
                str(out),
                "--name",
                "g",
                "--quiet",
            ]
        )
        == 0
    )
    rows = _rows(out / "g.csv")
    assert len(rows) == 16 and {r["method"] for r in rows[12:]} == {"heft", "bound"}


def test_gap_unknown_heuristic(tmp_path, tiny_instance, capsys):
    assert main(["gap", str(tiny_instance), "--heuristics", "heft,foo", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown heuristic 'foo'" in err and "heft, m-topo, m-etf, pardnn, heft-iter" in err


def test_gap_missing_instance(tmp_path, capsys):
    assert main(["gap", str(tmp_path / "nope.json"), "--output-dir", str(tmp_path)]) == 2
    assert "nope.json" in capsys.readouterr().err


def test_gap_parallel_jobs(tiny_instance, tmp_path, capsys):
    argv = ["gap", str(tiny_instance), "--no-exact", "--jobs", "2", "--output-dir", str(tmp_path), "--name", "p"]
    assert main(argv) == 0
    rows = _rows(tmp_path / "p.csv")
    assert sorted(r["method"] for r in rows) == ["bound", "heft", "heft-iter", "m-etf", "m-topo", "pardnn"]
    assert all(r["status"] in ("feasible", "bound") for r in rows)
    bound = next(float(r["bound"]) for r in rows if r["method"] == "bound")
    assert all(float(r["value"]) >= bound * (1 - 1e-9) for r in rows if r["value"])
