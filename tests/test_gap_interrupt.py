"""gap: an interrupt stops the sweep (exit 130) and keeps only finished rows; its flags are checked as solve's are;
children die with their parent (issue 20 items 8 and 9).  No test here waits on the clock: each waits for a
line or a file that says the state it needs."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from milp_partition import registry
from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO

#: A fake problem for the sweep: 'h1' returns at once, the exact run is interrupted (or, with HANG, never ends).
FAKE = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    from milp_partition.result import Result
    from milp_partition.sweep.jobs import exact_row

    HEURISTICS = ("h1",)
    AXES = {}
    OBJECTIVE = "value"
    OPTIONS = frozenset()  # the registry's cli module too: no options, claims no file

    def register_options(parser, command):
        pass

    def claims(data):
        return False

    def recognize(path):
        return None if str(path).endswith(".fake") else "not a fake instance"

    def check(path, point, options):
        pass

    def run(job):
        if job.method != "exact":
            return job.row(status="feasible", value=1.0, seconds="0")
        if os.environ.get("FAKE_HANG"):
            hang = Path(os.environ["FAKE_HANG"])  # the test waits for this file, written whole (a rename)
            hang.with_suffix(".tmp").write_text(str(os.getpid()))
            os.replace(hang.with_suffix(".tmp"), hang)
            while True:
                time.sleep(3600)
        result = Result(problem="fake", solver="x", objective_name="v", time_unit="s")
        result.stopped_by = "interrupt"  # what a chain returns after Ctrl-C
        return exact_row(job, result, {})
    """
)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "fake_gap.py").write_text(FAKE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.PROBLEMS, "fake", registry.ProblemEntry("fake", "fake_gap", "-", "-", gap="fake_gap"))
    instance = tmp_path / "one.fake"
    instance.write_text("{}")
    return instance


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_an_interrupted_run_is_no_row_and_is_run_again(fake: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["gap", str(fake), "--problem", "fake", "--output-dir", str(out), "--quiet", "--no-charts"]
    rc, _, err = run_cli(argv)
    assert rc == 130 and "interrupted" in err
    rows = _rows(out / "gap.csv")
    assert [(r["method"], r["status"]) for r in rows] == [("h1", "feasible")]  # the finished row is kept, alone
    rc, _, err = run_cli([a for a in argv if a != "--quiet"])
    assert rc == 130 and "resuming: 1 run(s)" in err  # the interrupted run counts as not done: it runs again
    assert [r["method"] for r in _rows(out / "gap.csv")] == ["h1"]


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--time-limit", "nan"), ("--time-limit", "-1"), ("--threads", "100000"), ("--jobs", "0"), ("--seed", "-1"),
     ("--name", "../x"), ("--name", "a/b"), ("--name", "..")],
)  # fmt: skip
def test_gap_checks_its_flags_as_solve_does(fake: Path, tmp_path: Path, flag: str, value: str) -> None:
    rc, _, err = run_cli(["gap", str(fake), "--output-dir", str(tmp_path / "o"), flag, value])
    assert rc == 2 and flag in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "x.csv").exists()


def test_gap_writes_to_scratch_by_default(fake: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_cli(["gap", str(fake), "--problem", "fake", "--quiet", "--no-charts"])
    assert (tmp_path / "scratch" / "gap.csv").is_file() and not (tmp_path / "results").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGTERM to a process group and /proc are Linux's")
def test_sigterm_with_jobs_2_stops_at_once_and_keeps_finished_rows(tmp_path: Path) -> None:
    """The parent used to wait for the runs in flight (23 s, or forever) and drop the rows that had ended."""
    (tmp_path / "fake_gap.py").write_text(FAKE)
    instance = tmp_path / "one.fake"
    instance.write_text("{}")
    hang = tmp_path / "hang.pid"
    out = tmp_path / "out"
    script = (
        "import sys; from milp_partition import registry; "
        "registry.PROBLEMS['fake'] = registry.ProblemEntry('fake', 'fake_gap', '-', '-', gap='fake_gap'); "
        "from milp_partition.cli.dispatch import main; "
        f"sys.exit(main(['gap', {str(instance)!r}, '--problem', 'fake', '--jobs', '2', '--no-charts', "
        f"'--output-dir', {str(out)!r}]))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]), "FAKE_HANG": str(hang)}
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:  # until the heuristic's row has ended and the exact run hangs in its worker
        if "h1 feasible" in line and hang.exists():
            break
        if "h1 feasible" in line:
            while not hang.exists():  # written by the worker as its run starts (no sleeping on the clock)
                pass
            break
    worker = int(hang.read_text())
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)  # the old code waited for the hanging run: it never ended
    finally:
        for pid in (proc.pid, worker):  # leave nothing running if it failed
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    assert proc.returncode == 130, err
    assert [(r["method"], r["status"]) for r in _rows(out / "gap.csv")] == [("h1", "feasible")]
    assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text().lower()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_cbc_child_dies_with_its_parent_killed_by_sigkill(tmp_path: Path) -> None:
    """PuLP's CBC runs under the shim that sets PR_SET_PDEATHSIG: SIGKILL of the solver process (no handler sees it)
    no longer leaves CBC running to its own limit.  'sleep' stands for CBC here."""
    script = (
        "import sys; from milp_partition.backends import cbc; cbc._cbc_dies_with_us(); "
        "from pulp.apis import coin_api; p = coin_api.subprocess.Popen(['sleep', '1000']); "
        "print(p.pid, flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert Path(f"/proc/{child}").exists()
    proc.kill()
    proc.wait(timeout=60)
    gone = False
    for _ in range(10**7):  # the kernel kills it as the parent exits: gone within microseconds, never after a sleep
        try:
            state = Path(f"/proc/{child}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            gone = True
            break
        if state == "Z":  # killed; not reaped yet (its parent is gone, init reaps it)
            gone = True
            break
    if not gone:
        os.kill(child, signal.SIGKILL)
    assert gone


def test_gap_workers_die_with_the_sweep() -> None:
    """The local pool's workers start with die_with_parent (a SIGKILL of the sweep takes them along)."""
    import inspect

    from milp_partition.sweep import executors

    assert "initializer=die_with_parent" in inspect.getsource(executors._run_local)
    json.dumps({})
