"""The command line: reports, result JSON, exit codes, and errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from milp_partition.cli.dispatch import main

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "examples" / "tiny.json"


def test_solve_writes_the_result_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "result.json"
    assert main(["solve", str(TINY), "--output", str(out), "--progress", "0"]) == 0
    report = capsys.readouterr().out
    assert "OPTIMAL" in report and "verified" in report
    data = json.loads(out.read_text())
    for key in ("status", "objective", "bound", "gap", "solve_seconds", "solver", "assignment"):
        assert key in data
    assert data["status"] == "optimal" and data["solver"] == "cpsat"
    assert set(data["assignment"]) == {n["id"] for n in json.loads(TINY.read_text())["nodes"]}
    assert data["bound"] <= data["objective"] + 1e-12
    # evaluate recomputes the same objective from the written solution
    assert main(["evaluate", str(TINY), str(out)]) == 0
    line = capsys.readouterr().out
    assert f"{data['objective']:.10g}" in line


def test_cbc_and_cpsat_agree_on_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    values = []
    for solver in ("cpsat", "cbc"):
        assert main(["solve", str(TINY), "--solver", solver, "--quiet"]) == 0
        line = capsys.readouterr().out
        assert line.startswith("optimal")
        values.append(float(line.split("objective=")[1].split()[0]))
    assert values[0] == pytest.approx(values[1], rel=1e-6)


def test_infeasible_is_an_answer(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["solve", str(TINY), "--memory", "1MiB", "--quiet"])
    assert code == 3
    assert capsys.readouterr().out.startswith("infeasible")


def test_evaluate_reports_violations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [n["id"] for n in json.loads(TINY.read_text())["nodes"]]
    bad = tmp_path / "sol.json"
    bad.write_text(json.dumps({n: ("gpu0" if i % 2 else "gpu1") for i, n in enumerate(nodes)}))
    assert main(["evaluate", str(TINY), str(bad)]) == 3
    assert "not contiguous" in capsys.readouterr().out


def test_missing_cluster_is_explained(capsys: pytest.CaptureFixture[str], shared_benchmarks: Path) -> None:
    code = main(["solve", str(shared_benchmarks / "pipedream" / "alexnet.txt")])
    assert code == 2
    err = capsys.readouterr().err
    assert "alexnet.txt" in err and "--devices" in err


def test_pipedream_with_cluster_from_options(capsys: pytest.CaptureFixture[str], shared_benchmarks: Path) -> None:
    code = main(
        [
            "solve",
            str(shared_benchmarks / "pipedream" / "alexnet.txt"),
            "--devices",
            "2",
            "--memory",
            "32GiB",
            "--link-bandwidth",
            "10GB/s",
            "--memory-model",
            "1f1b",
            "--optimizer-factor",
            "3",
            "--quiet",
        ]
    )
    assert code == 0
    assert capsys.readouterr().out.startswith("optimal")


#: Bad native files and a word their error names.
BAD_INPUTS = [
    (
        '{"format": "milp-partition/1", "nodes": [{"id": "a"}, {"id": "b"}], "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "a"}]}',
        "cycle",
    ),
    ('{"format": "milp-partition/1", "nodes": [{"id": "a", "forward_time": -1}]}', "forward_time"),
    ('{"format": "milp-partition/1", "nodes": [{"id": "a"}], "edges": [{"source": "a", "target": "zz"}]}', "zz"),
    ('{"format": "milp-partition/1", "nodes": [', "JSON"),
]


@pytest.mark.parametrize("content, needle", BAD_INPUTS)
def test_bad_input_exits_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, needle: str
) -> None:
    # in this process (the entry point python -m milp_partition calls; an exception escaping it fails the test as a
    # traceback would); the real process is the test below
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["solve", str(bad), "--devices", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "bad.json" in err and needle in err


def test_bad_input_exits_2_without_traceback_from_a_real_process(tmp_path: Path) -> None:
    content, needle = BAD_INPUTS[0]
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = subprocess.run(
        [sys.executable, "-m", "milp_partition", "solve", str(bad), "--devices", "2"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "bad.json" in proc.stderr and needle in proc.stderr


def test_info(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(REPO / "examples" / "bert24_training.json")]) == 0
    out = capsys.readouterr().out
    assert "64 nodes (32 forward, 32 backward)" in out and "6 accelerators" in out


def test_strategy_info_solve_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str], shared_benchmarks: Path) -> None:
    instance = shared_benchmarks / "strategy" / "alexnet_p4.json"
    assert main(["info", str(instance)]) == 0
    assert "14 layers" in capsys.readouterr().out
    out = tmp_path / "r.json"
    assert main(["solve", str(instance), "--progress", "0", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["status"] == "optimal" and data["problem"] == "strategy"
    capsys.readouterr()
    assert main(["evaluate", str(instance), str(out)]) == 0
    assert f"cost = {data['objective']:.15g}" in capsys.readouterr().out
    wrong = tmp_path / "w.json"
    wrong.write_text(json.dumps({**data["assignment"], "0": "no-such-config"}))
    assert main(["evaluate", str(instance), str(wrong)]) == 2  # a malformed solution is bad input, as for placement
    assert "layer '0': unknown configuration 'no-such-config'" in capsys.readouterr().err


def test_output_cut_short_by_a_closed_pipe_gives_no_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """`milp-partition solve ... | head -3`: the closed pipe ends the command quietly with exit 0."""
    import sys
    from pathlib import Path

    class ClosedPipe:
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            pass

        def fileno(self) -> int:
            raise OSError("no file")

    example = Path(__file__).resolve().parents[1] / "examples" / "tiny.json"
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["solve", str(example), "--progress", "0"]) == 0
