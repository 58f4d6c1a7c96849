"""The command line on bad input, odd flags, interrupts and output files (issue 14): one clear line and exit 2,
or a correct answer; never a traceback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from milp_partition.cli.dispatch import main
from tests.fuzz_inputs import check_contract, mutations, run_cli
from tests.fuzz_seeds import REPO, SHARED, make_seeds

TINY = REPO / "examples" / "tiny.json"
TABLES = SHARED / "strategy" / "alexnet_p4.json"
LAYERS = REPO / "examples" / "gpt4_layers.json"
PLACEMENT = SHARED / "placement" / "example-1.json"
#: Mutated files per input format (seeded; the whole fuzz test takes seconds).
FUZZ_CASES = 25


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[list[str]]]]:
    return make_seeds(tmp_path_factory.mktemp("seeds"))


FORMATS = [
    "native", "tarnawski", "pipedream", "node-link", "cluster", "profile", "strategy-tables", "strategy-layers",
    "placement", "result-pipeline", "result-strategy", "result-placement", "joint-piper", "joint-native",
    "result-joint",
]  # fmt: skip


@pytest.mark.parametrize("fmt", FORMATS)
def test_fuzzed_inputs_give_a_clear_error_or_an_answer(fmt: str, seeds, tmp_path: Path) -> None:
    """Mutated files of every format: exit 2 with one line naming the problem, or an answer (0, 3, 4); never exit 1."""
    seed_file, commands = seeds[fmt]
    codes = []
    for k, case in enumerate(mutations(seed_file, FUZZ_CASES, seed=sum(map(ord, fmt)))):
        path = tmp_path / f"case{k}{seed_file.suffix}"
        path.write_bytes(case.data)
        for cmd in commands:
            rc, _ = check_contract([str(path) if a == "{}" else a for a in cmd], f"{fmt} {case.what} ({cmd[0]})")
            codes.append(rc)
    assert 2 in codes  # the mutations do reach the readers' checks


BAD_FLAGS = [
    ["--time-limit", "-5"],
    ["--time-limit", "0"],
    ["--time-limit", "nan"],
    ["--time-limit", "inf"],
    ["--threads", "-1"],
    ["--threads", "0"],
    ["--threads", "100000"],
    ["--seed", "-1"],
    ["--seed", "1180591620717411303424"],
    ["--devices", "0"],
    ["--devices", "10000000"],
    ["--memory", "0"],
    ["--memory", "-3GiB"],
    ["--memory", "1e40"],
    ["--memory", "lots"],
    ["--link-bandwidth", "0"],
    ["--link-bandwidth", "inf"],
    ["--link-latency", "-1"],
    ["--cpu-cores", "-2"],
    ["--cpu-cores", "1000000000"],
    ["--max-ideals", "0"],
    ["--progress", "-1"],
    ["--optimizer-factor", "-3"],
    ["--bytes-per-element", "0"],
]


@pytest.mark.parametrize("flag", BAD_FLAGS, ids=lambda f: " ".join(f))
def test_bad_numeric_flags_exit_2_with_one_line(flag: list[str]) -> None:
    rc, out, err = run_cli(["solve", str(TINY), *flag])
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag[0] in lines[0], err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["solve", str(PLACEMENT), "--link-bandwidth", "1GB/s"], "--bandwidth: does not apply to the placement problem"),
        (["solve", str(TINY), "--tie-blocks"], "--tie-blocks: does not apply to the pipeline problem"),
        (["solve", str(TINY), "--write-tables", "t.json"], "--write-tables: does not apply"),
        (["solve", str(TINY), "--max-time-per-sample", "5"], "applies only with --objective memory"),
        (["solve", str(TABLES), "--devices", "4"], "--devices: applies to strategy-layers files"),
        (["solve", str(TABLES), "--no-contiguous"], "--no-contiguous: does not apply to the strategy problem"),
        (["solve", str(PLACEMENT), "--devices", "4"], "--devices: does not apply to the placement problem"),
        (["solve", str(PLACEMENT), "--memory-model", "1f1b"], "1f1b does not apply to placement"),
        (["solve", str(TINY), "--heuristic", "heft"], "--heuristic: does not apply to the pipeline problem"),
        (["solve", str(PLACEMENT), "--heuristic", "nosuch"], "unknown heuristic 'nosuch'"),
    ],
)
def test_flags_that_do_not_apply_are_refused(argv: list[str], needle: str) -> None:
    rc, _, err = run_cli(argv)
    assert rc == 2 and needle in err, err


def test_version() -> None:
    rc, out, _ = run_cli(["--version"])
    assert rc == 0 and out.startswith("milp-partition ")


def _write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_odd_but_accepted_instances_are_refused_with_the_reason(tmp_path: Path) -> None:
    cluster = {"devices": [{"id": "g0"}]}
    empty = _write(tmp_path, "empty.json", {"format": "milp-partition/1", "nodes": [], "edges": [], "cluster": cluster})
    rc, _, err = run_cli(["solve", str(empty)])
    assert rc == 2 and "no nodes" in err
    data = json.loads(TINY.read_text())
    data["cluster"]["devices"].append({"id": "x", "kind": "cpu"})
    rc, _, err = run_cli(["solve", str(_write(tmp_path, "cpu_kind.json", data))])
    assert rc == 2 and "reserved for host CPU cores" in err
    data = json.loads(TINY.read_text())
    data["cluster"]["host_cpu_cores"] = 1
    data["cluster"]["devices"][0]["id"] = "cpu0"
    rc, _, err = run_cli(["solve", str(_write(tmp_path, "cpu0.json", data))])
    assert rc == 2 and "taken by host CPU core cpu0" in err
    data = json.loads(TINY.read_text())
    data["cluster"]["devices"][0]["kind"] = ""
    rc, _, err = run_cli(["solve", str(_write(tmp_path, "kind.json", data))])
    assert rc == 2 and "kind must be a non-empty name" in err
    data = json.loads(TINY.read_text())
    data["edges"][0]["bytes"] = 1e40
    rc, _, err = run_cli(["solve", str(_write(tmp_path, "bytes.json", data))])
    assert rc == 2 and "too large" in err


def test_nodelink_graph_attributes_must_be_an_object(tmp_path: Path) -> None:
    from milp_partition.io import read_instance, write_instance

    path = tmp_path / "nl.json"
    write_instance(read_instance(TINY), path, "nodelink")
    data = json.loads(path.read_text())
    data["graph"] = []
    rc, _, err = run_cli(["solve", str(_write(tmp_path, "nl_bad.json", data))])
    assert rc == 2 and "field 'graph': must be a JSON object" in err


@pytest.mark.parametrize(
    "layer, needle",
    [
        ({"id": "x", "kind": "nosuch", "b": 4, "n": 4}, "unknown kind 'nosuch'"),
        ({"id": "x", "kind": "norm", "b": 10**30, "n": 4}, "dimension 'b' must be a whole number"),
        ({"id": "x", "kind": "norm", "b": 4}, "dimension 'n'"),
    ],
)
def test_info_checks_strategy_layers_as_solve_does(layer: dict, needle: str, tmp_path: Path) -> None:
    path = _write(tmp_path, "layers.json", {"format": "strategy-layers/1", "layers": [layer], "edges": []})
    for argv in (["info", str(path)], ["solve", str(path), "--devices", "2"]):
        rc, _, err = run_cli(argv)
        assert rc == 2 and needle in err, (argv, err)
    cyc = {
        "format": "strategy-layers/1",
        "layers": [{"id": "a", "kind": "norm", "b": 2, "n": 2}, {"id": "b", "kind": "norm", "b": 2, "n": 2}],
        "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "a"}],
    }
    rc, _, err = run_cli(["info", str(_write(tmp_path, "cyc.json", cyc))])
    assert rc == 2 and "cycle" in err


def test_malformed_solutions_are_bad_input_for_every_problem(tmp_path: Path) -> None:
    """One rule: a solution naming unknown ids or devices, or leaving one out, is bad input (2), not infeasible (3)."""
    rc, _, err = run_cli(["evaluate", str(TINY), str(_write(tmp_path, "a.json", {"nosuch": "gpu0"}))])
    assert rc == 2 and "unknown node id 'nosuch'" in err
    rc, _, err = run_cli(["evaluate", str(TABLES), str(_write(tmp_path, "b.json", {"0": "1x1"}))])
    assert rc == 2 and "unknown configuration" in err
    rc, _, err = run_cli(["evaluate", str(PLACEMENT), str(_write(tmp_path, "c.json", {"assignment": {"t": 1}}))])
    assert rc == 2


def test_placement_starts_far_out_do_not_widen_the_tolerance(tmp_path: Path) -> None:
    """Every task at start 1e12 on one device overlaps: infeasible, however large the starts."""
    out = tmp_path / "r.json"
    assert main(["solve", str(PLACEMENT), "-q", "--progress", "0", "-o", str(out)]) == 0
    result = json.loads(out.read_text())
    dev = next(iter(result["assignment"].values()))
    sched = {t: {"device": dev, "start": 1e12} for t in result["assignment"]}
    rc, out_text, _ = run_cli(["evaluate", str(PLACEMENT), str(_write(tmp_path, "s.json", sched))])
    assert rc == 3 and "INFEASIBLE" in out_text


def test_infeasible_time_bound_says_the_least_time_per_sample(shared_benchmarks: Path) -> None:
    """The mCAP example of issue 14: 300 ms is below the least time per sample (333.2124256 ms, proven)."""
    vgg16 = str(shared_benchmarks / "pipedream" / "vgg16.txt")
    flags = ["--devices", "4", "--memory", "32GiB", "--link-bandwidth", "10GB/s", "--memory-model", "1f1b"]
    rc, out, _ = run_cli(["solve", vgg16, *flags, "--objective", "memory", "--max-time-per-sample", "300", "--progress", "0"])
    assert rc == 3 and "least time per sample these settings allow is 333.2124256 ms (proven)" in out


def test_output_is_checked_before_solving_and_replaced_atomically(tmp_path: Path, monkeypatch) -> None:
    rc, out, err = run_cli(["solve", str(TINY), "-o", str(tmp_path / "no" / "such" / "r.json")])
    assert rc == 2 and out == "" and "does not exist" in err  # refused before solving: no report printed
    rc, _, err = run_cli(["solve", str(TINY), "-o", str(tmp_path)])
    assert rc == 2 and "is a folder" in err
    target = tmp_path / "r.json"
    assert main(["solve", str(TINY), "-q", "--progress", "0", "-o", str(target)]) == 0
    before = target.read_text()

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(27, "File too large")

    monkeypatch.setattr(os, "replace", failing_replace)
    rc, _, err = run_cli(["solve", str(TINY), "-q", "--progress", "0", "--solver", "none", "-o", str(target)])
    assert rc == 2 and "nothing was replaced" in err
    assert target.read_text() == before  # the old result is intact
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind


@pytest.mark.skipif(not Path("/proc").is_dir() or sys.platform != "linux", reason="needs /proc to see CBC children")
def test_sigterm_writes_the_best_verified_answer_and_stops_cbc(tmp_path: Path, shared_benchmarks: Path) -> None:
    """SIGTERM during a CBC solve: exit 130, the heuristics' verified answer written, no CBC left, no temp files."""
    out = tmp_path / "r.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    instance = shared_benchmarks / "pipeline" / "LayerGraphs" / "bert24_inference.json"
    cmd = [sys.executable, "-m", "milp_partition", "solve", str(instance), "--solver", "cbc", "--time-limit", "300"]
    proc = subprocess.Popen(
        [*cmd, "--progress", "1", "-o", str(out)], stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # wait until CBC runs (on progress lines, no sleeping on the clock)
        if line.startswith("[cbc]") and _cbc_children(proc.pid):
            break
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130
    result = json.loads(out.read_text())
    assert result["status"] == "feasible" and result["stopped_by"] == "interrupt"
    assert abs(result["objective"] - 17.78990625) <= 1e-9  # the DPs' verified value on this instance
    assert "interrupted" in stdout
    assert not _cbc_children(proc.pid)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # PuLP's and our temp files are gone


def _is_cbc_child_of(proc_dir: Path, parent: int) -> bool:
    try:
        stat = (proc_dir / "stat").read_text()
    except OSError:
        return False
    name, rest = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :].split()
    return name.startswith("cbc") and int(rest[1]) == parent


def _cbc_children(parent: int) -> list[Path]:
    return [p for p in Path("/proc").iterdir() if p.name.isdigit() and _is_cbc_child_of(p, parent)]


def test_an_interrupt_during_a_dp_keeps_the_earlier_dps_answer(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C while the ideal DP runs: the chain DP's verified answer is written and printed, exit 130."""
    from milp_partition.pipeline import solve as pipeline_solve

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline_solve, "ideal_dp", interrupted)
    out = tmp_path / "r.json"
    rc, text, _ = run_cli(["solve", str(TINY), "--progress", "0", "-o", str(out)])
    assert rc == 130 and "interrupted; the best verified solution" in text
    result = json.loads(out.read_text())
    assert result["status"] == "feasible" and result["stopped_by"] == "interrupt"
    assert [h["name"] for h in result["heuristics"]] == ["chain_dp"] and result["objective"] is not None


def test_other_commands_check_their_flags_and_output_before_working(tmp_path: Path) -> None:
    """calibrate and import refuse an unwritable --output (before minutes of measuring or tracing) and bad numbers."""
    rc, _, err = run_cli(["calibrate", "--tiny", "--output", str(tmp_path / "no" / "p.json")])
    assert rc == 2 and "does not exist" in err
    rc, _, err = run_cli(["import", "torch", "m:f", "--layer-depth", "0", "-o", str(tmp_path / "g.json")])
    assert rc == 2 and "--layer-depth" in err


def test_gap_output_dir_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    for target in (afile, afile / "sub"):
        rc, _, err = run_cli(["gap", str(PLACEMENT), "--no-exact", "--quiet", "--output-dir", str(target)])
        assert rc == 2 and len(err.strip().splitlines()) == 1 and str(target) in err, err


def test_sigterm_stops_cpsat_and_keeps_its_incumbent(tmp_path: Path) -> None:
    """SIGTERM while CP-SAT searches (a liveness-memory strategy it does not prove for minutes): it stops the search,
    the verified incumbent is written, exit 130 (without the worker thread it waited for the whole time limit)."""
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "milp_partition", "solve", str(LAYERS), "--devices", "8", "--memory-limit", "2GiB"]
    cmd += ["--memory-model", "liveness", "--time-limit", "600", "--progress", "1", "-o", str(out)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = None
    for line in proc.stderr:  # wait until CP-SAT's progress shows an incumbent (on its lines, not on the clock)
        m = re.match(r"\[cpsat\]\s+\S+s\s+incumbent (\S+)", line)
        if m and m.group(1) != "-":
            seen = m.group(1)
            break
    assert seen is not None, "CP-SAT ended without reporting an incumbent"
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130, stdout[-500:]
    result = json.loads(out.read_text())
    # an incumbent existed when the signal came: it is kept, verified, and no worse than the one the progress showed
    assert result["status"] == "feasible" and result["stopped_by"] == "interrupt"
    assert result["objective"] is not None and "interrupted" in result["message"]
