"""``milp-partition run`` against hand-edited plans, foreign factories, big plans and signals (issue 43 items 6, 7, 9,
10, 11, 13 and 15, run's part).

The plan checks need no torch (the plan and graph are read as JSON); the factory, signal and process tests run the
command in a subprocess with generous guards against a hang, never a speed assertion.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from milp_partition.errors import InputError
from milp_partition.run import launch as launch_module
from milp_partition.run.launch import HostLimits, check_host
from milp_partition.run.spec import read_run_spec
from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO
from tests.run_workers import fail_or_wait

MLP = "milp_partition.importers.models:mlp_small_test"


def _graph(tmp_path: Path, reference: str = MLP, nodes: tuple[str, ...] = ("0", "1", "2", "3")) -> Path:
    path = tmp_path / "g.json"
    ids = [*nodes, *(f"{v}:bwd" for v in nodes)]
    path.write_text(
        json.dumps({"nodes": [{"id": v} for v in ids], "layers": {"model": {"reference": reference, "inputs": ["8x32"]}}})
    )
    return path


def _plan(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    stages = [
        {"nodes": ["0", "1"], "data_parallel": 1, "tensor_parallel": 1, "configs": {"0": "vanilla", "1": "vanilla"}},
        {"nodes": ["2", "3"], "data_parallel": 1, "tensor_parallel": 1, "configs": {"2": "vanilla", "3": "vanilla"}},
    ]
    instance = {"source": "g.json", "microbatches": 4, "devices": 2, "degrees": [1, 2]}
    plan = {"problem": "joint", "stages": stages, "instance": instance, "time_per_sample": 1.0}
    plan.update(changes)
    return plan


def _read(tmp_path: Path, plan: dict[str, Any], factory: str | None = None) -> Any:
    if not (tmp_path / "g.json").exists():
        _graph(tmp_path)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(plan))
    return read_run_spec(path, factory=factory)


def test_a_good_plan_reads(tmp_path: Path) -> None:
    spec = _read(tmp_path, _plan(tmp_path))
    assert spec.shape == (2, 1, 1) and spec.node_order == ("0", "1", "2", "3") and spec.model == MLP


def _edited(tmp_path: Path, edit: str) -> dict[str, Any]:
    plan = _plan(tmp_path)
    st = plan["stages"]
    if edit == "no configs":
        del st[0]["configs"]
    elif edit == "no microbatches":
        del plan["instance"]["microbatches"]
    elif edit == "N=0":
        plan["instance"]["microbatches"] = 0
    elif edit == "d=0":
        st[0]["data_parallel"] = st[1]["data_parallel"] = 0
    elif edit == "d=x":
        st[0]["data_parallel"] = "x"
    elif edit == "instance not an object":
        plan["instance"] = ["g.json"]
    elif edit == "swapped stages":
        plan["stages"] = [st[1], st[0]]
    elif edit == "t=2 with d=2":
        for s in st:
            s["data_parallel"] = s["tensor_parallel"] = 2
    elif edit == "t=2 past the plan's devices":
        for s in st:
            s["tensor_parallel"] = 2
    elif edit == "t=8 not offered":
        plan["instance"]["devices"] = 16
        for s in st:
            s["tensor_parallel"] = 8
    elif edit == "d=1000":
        for s in st:
            s["data_parallel"] = 1000
    elif edit == "unknown node":
        st[0]["nodes"].append("9")
        st[0]["configs"]["9"] = "vanilla"
    elif edit == "dropped node":
        st[1]["nodes"].remove("3")
        del st[1]["configs"]["3"]
    elif edit == "duplicated node":
        st[1]["nodes"].append("1")
        st[1]["configs"]["1"] = "vanilla"
    elif edit == "stage not an object":
        st[0] = "0,1"
    return plan


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ("no configs", "stages[0].configs"),
        ("no microbatches", "instance.microbatches"),
        ("N=0", "instance.microbatches"),
        ("d=0", "stages[0].data_parallel"),
        ("d=x", "stages[0].data_parallel"),
        ("instance not an object", "instance"),
        ("swapped stages", "stages"),
        ("t=2 with d=2", "stages"),
        ("d=1000", "instance.microbatches"),
        ("t=2 past the plan's devices", "stages"),
        ("t=8 not offered", "stages[0].tensor_parallel"),
        ("unknown node", "stages[0].nodes"),
        ("dropped node", "stages"),
        ("duplicated node", "stages[1].nodes"),
        ("stage not an object", "stages[0]"),
    ],
)
def test_a_hand_edited_plan_is_refused_naming_the_file_and_field(tmp_path: Path, edit: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        _read(tmp_path, _edited(tmp_path, edit))
    assert err.value.source == str(tmp_path / "p.json") and err.value.where == field, str(err.value)


def test_ddp_over_pipeline_stages_with_one_micro_batch_per_stage_is_refused_and_one_more_reads(tmp_path: Path) -> None:
    """Torch's DDP inside Schedule1F1B asserts when each replica has exactly one micro-batch per stage (2 stages x d = 2
    at N = 4): run refuses the plan before any worker starts, naming the field and the count that runs."""
    plan = _plan(tmp_path)
    plan["instance"]["devices"] = 4
    for st in plan["stages"]:
        st["data_parallel"] = 2
    with pytest.raises(InputError, match=r"solve with --microbatches 6 or more") as err:
        _read(tmp_path, plan)
    assert err.value.where == "instance.microbatches"
    plan["instance"]["microbatches"] = 6  # three a replica on two stages
    assert _read(tmp_path, plan).shape == (2, 2, 1)


def test_stages_of_different_degrees_read_and_their_device_count_is_listed_in_the_tables_order(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    plan["stages"][0]["data_parallel"] = 2  # stage 1 (2, 1), stage 2 (1, 1): 3 devices, the plan was solved for 2
    with pytest.raises(InputError, match=r"the stages use 2 x 1 \+ 1 x 1 = 3 devices"):
        _read(tmp_path, plan)
    plan["instance"]["devices"] = 3
    spec = _read(tmp_path, plan)
    assert not spec.uniform and spec.world_size == 3


def test_a_factory_named_only_in_the_graph_is_not_run(tmp_path: Path) -> None:
    _graph(tmp_path, reference="os:system")
    with pytest.raises(InputError, match="give --factory os:system") as err:
        _read(tmp_path, _plan(tmp_path))
    assert err.value.where == "layers.model.reference"
    with pytest.raises(InputError, match="not the factory this graph was imported from"):
        _read(tmp_path, _plan(tmp_path), factory="m:other")
    assert _read(tmp_path, _plan(tmp_path), factory="os:system").model == "os:system"  # named: the user's choice


def test_the_cli_refuses_a_foreign_factory_before_importing_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef f():\n    return None\n")
    _graph(tmp_path, reference=f"{tmp_path / 'evil.py'}:f")
    (tmp_path / "p.json").write_text(json.dumps(_plan(tmp_path)))
    rc, _, err = run_cli(["run", str(tmp_path / "p.json"), "--steps", "1"])
    assert rc == 2 and "--factory" in err and not marker.exists(), err


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("import sys\ndef f():\n    sys.exit(3)\n", "called sys.exit(3)"),
        ("def f():\n    raise ValueError('no weights')\n", "ValueError: no weights"),
        ("def f():\n    return 42\n", "not a torch.nn.Module"),
        ("def g():\n    return 42\n", "has no factory 'f'"),
    ],
)
def test_a_failing_factory_is_bad_input_not_a_worker_traceback(tmp_path: Path, body: str, message: str) -> None:
    pytest.importorskip("torch")
    (tmp_path / "fac.py").write_text(body)
    reference = f"{tmp_path / 'fac.py'}:f"
    _graph(tmp_path, reference=reference)
    (tmp_path / "p.json").write_text(json.dumps(_plan(tmp_path)))
    rc, _, err = run_cli(["run", str(tmp_path / "p.json"), "--steps", "1", "--factory", reference])
    assert rc == 2 and message in err and "Traceback" not in err, err
    assert "run: building the model" in err  # the progress line before the check


def test_run_refuses_to_write_over_the_graph_its_plan_names(tmp_path: Path) -> None:
    graph = _graph(tmp_path)
    (tmp_path / "p.json").write_text(json.dumps(_plan(tmp_path)))
    text = graph.read_text()
    rc, _, err = run_cli(["run", str(tmp_path / "p.json"), "-o", str(graph)])  # the graph is not on the command line
    assert rc == 2 and "is the input file" in err and graph.read_text() == text, err


def test_steps_past_the_maximum_are_refused(tmp_path: Path) -> None:
    # refused as the command line is read (the plan is not even opened: it does not exist), not run until killed
    rc, _, err = run_cli(["run", str(tmp_path / "absent.json"), "--steps", str(10**23)])
    assert rc == 2 and "--steps" in err and "10000" in err, err


def test_a_plan_the_machine_cannot_host_is_refused_with_the_flag_to_force_it() -> None:
    small = HostLimits(cores=2, memory_available_bytes=8 * 2**30, gpus=0)
    check_host(2, 1, small)  # the tests' 2-process runs on a 2-core machine
    with pytest.raises(InputError, match=r"2000 processes .* 2 core.*--oversubscribe"):
        check_host(2000, 1, small)
    with pytest.raises(InputError, match=r"available.*--oversubscribe"):
        check_host(4, 1, HostLimits(cores=64, memory_available_bytes=2**30, gpus=0))
    check_host(8, 1, HostLimits(cores=2, memory_available_bytes=2**30, gpus=8))  # a GPU per rank


def test_the_cli_refuses_an_unhostable_plan_before_starting_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import milp_partition.cli.run as cli_run

    monkeypatch.setattr(cli_run, "host_limits", lambda: HostLimits(cores=1, memory_available_bytes=None, gpus=0))
    monkeypatch.setattr(cli_run, "run_plan", lambda *a, **k: pytest.fail("started the ranks"))
    _graph(tmp_path)
    (tmp_path / "p.json").write_text(json.dumps(_plan(tmp_path)))
    rc, _, err = run_cli(["run", str(tmp_path / "p.json"), "--threads", "2"])  # 2 ranks x 2 threads on 1 core
    assert rc == 2 and "--oversubscribe" in err, err


# -- processes and signals ---------------------------------------------------------------------------------------------


def _marked(mark: str) -> list[int]:
    """Live processes whose environment holds ``mark`` (the run and every worker it started)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark.encode() in (entry / "environ").read_bytes() and _state(entry.name) != "Z":
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _state(pid: str) -> str:
    """A process's state letter from ``/proc/PID/stat`` (``Z``: a zombie); OSError once it is gone."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_worker_whose_launcher_died_before_it_started_exits_at_once() -> None:
    # the window of the spawn: the launcher killed before the worker asked for its parent's death signal
    code = (
        "from milp_partition.run.launch import _rank_main\n"
        "_rank_main(lambda rank: print('ran'), 0, 1, '.', ())\n"  # parent pid 1: not ours, as after an orphaning
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 1 and "ran" not in done.stdout
    from milp_partition.run.launch import _BOOT

    # the boot code checks before it reads its call (a file that is not there) or imports anything of the project
    done = subprocess.run(
        [sys.executable, "-c", _BOOT, str(REPO / "absent.call"), "1"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1 and done.stderr == ""


def _descendants(pid: str = "self") -> list[int]:
    """The live descendants of a process (Linux): its children, theirs, and so on (none once it is gone)."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                out += [int(child), *_descendants(child)]
    except OSError:
        pass
    return out


def _children() -> list[int]:
    """This process's live workers (Linux): its descendants other than multiprocessing's fork server and resource
    tracker (the rank server of ``milp_partition.run.launch``, which stays to serve this process's later runs, and its
    helper), whose children the workers are; zombies are not counted."""
    pids = []
    for pid in _descendants():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = _state(str(pid))
        except OSError:
            continue
        if b"multiprocessing.forkserver" not in cmd and b"multiprocessing.resource_tracker" not in cmd and state != "Z":
            pids.append(pid)
    return sorted(pids)


@pytest.mark.skipif(not launch_module.FORK_SERVER, reason="the rank server is Linux's")
def test_a_forked_worker_whose_launcher_is_gone_exits_at_once(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    code = (
        f"from milp_partition.run.launch import _forked_main\n_forked_main({str(tmp_path / 'absent.call')!r}, {gone.pid}, {{}})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 1 and done.stderr == ""  # before reading its call (a file that is not there)


@pytest.mark.skipif(not launch_module.FORK_SERVER, reason="the rank server is Linux's")
def test_forked_workers_take_the_launchers_environment_and_never_its_main_module(tmp_path: Path) -> None:
    # a launcher script without the main guard: a worker that imported it would run the launch again
    script = tmp_path / "launcher.py"
    script.write_text(
        "import os, sys, tempfile\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from milp_partition.run.launch import run_ranks\n"
        "from tests.run_workers import write_env\n"
        "for value in ('first', 'second'):\n"
        "    os.environ['MILP_RUN_TEST_VALUE'] = value\n"
        "    with tempfile.TemporaryDirectory() as tmp:\n"
        f"        run_ranks(write_env, 2, ('MILP_RUN_TEST_VALUE', {str(tmp_path)!r}), tmp)\n"
        f"    print(sorted(open(os.path.join({str(tmp_path)!r}, f'env{{r}}.txt')).read() for r in range(2)))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['first', 'first']", "['second', 'second']"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_failed_worker_stops_the_others_and_is_one_line(tmp_path: Path) -> None:
    from milp_partition.run.launch import WorkerFailed, run_ranks

    before = _children()

    with pytest.raises(WorkerFailed, match=r"^rank 1 failed: ValueError: a broken stage$") as err:
        run_ranks(fail_or_wait, 3, (600.0,), str(tmp_path))
    assert "Traceback" in err.value.details and "fail_or_wait" in err.value.details
    assert _children() == before  # rank 0 and 2 (600 s each) were stopped and reaped


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_interrupt_during_the_spawn_stops_every_worker_started(tmp_path: Path) -> None:
    from milp_partition.run.launch import run_ranks

    before = _children()

    def interrupt(line: str) -> None:
        raise KeyboardInterrupt  # as SIGTERM arrives (milp_partition.cli.dispatch makes it one)

    with pytest.raises(KeyboardInterrupt):
        run_ranks(fail_or_wait, 1, (600.0,), str(tmp_path), interrupt)
    assert _children() == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_run_leaves_no_worker_behind(tmp_path: Path, sig: int) -> None:
    pytest.importorskip("torch")
    _graph(tmp_path)
    (tmp_path / "p.json").write_text(json.dumps(_plan(tmp_path)))
    mark = f"MILP_RUN_TEST_{uuid.uuid4().hex}"
    env = {**os.environ, mark: "1"}
    cmd = [sys.executable, "-m", "milp_partition", "run", str(tmp_path / "p.json"), "--steps", "10000"]
    log = tmp_path / "stderr.txt"
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        for _ in range(1500):  # until both workers are started (a guard against a hang, not a speed check)
            if "started 2 rank(s)" in log.read_text() or proc.poll() is not None:
                break
            time.sleep(0.2)
        assert "started 2 rank(s)" in log.read_text() and len(_marked(mark)) >= 3, log.read_text()
        proc.send_signal(sig)
        rc = proc.wait(timeout=120)  # a guard: the workers of 10,000 steps would run for many minutes
        if sig == signal.SIGTERM:
            assert rc == 130 and "interrupted" in log.read_text(), log.read_text()
        for _ in range(600):  # the workers go with the launcher (their parent-death signal); a guard, not a speed check
            if not _marked(mark):
                break
            time.sleep(0.2)
        assert not _marked(mark), "workers outlived the run"
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()


# -- evaluate MODEL PLAN takes the cluster the plan records (item 15) --------------------------------------------------


def test_evaluate_takes_the_cluster_from_the_plan_it_is_given(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    graph, plan = tmp_path / "m.json", tmp_path / "plan.json"
    rc, _, err = run_cli(["import", "torch", MLP, "--input", "8x32", "--training", "--granularity", "layer", "-o", str(graph)])
    assert rc == 0, err
    solve = ["solve", str(graph), "--problem", "joint", "--devices", "2", "--memory", "1GiB", "--microbatches", "4"]
    rc, _, err = run_cli([*solve, "--bandwidth", "10GB/s", "-q", "-o", str(plan)])
    assert rc == 0, err
    objective = json.loads(plan.read_text())["objective"]
    rc, out, err = run_cli(
        ["evaluate", str(graph), str(plan), "--problem", "joint"]
    )  # main: "needs --devices K and --memory SIZE"
    assert rc == 0 and "--devices 2" in err and "--bandwidth 9.313 GiB/s" in err, err
    assert float(out.split("time_per_sample = ")[1].split()[0]) == pytest.approx(objective, rel=1e-9)
    rc, _, err = run_cli(["evaluate", str(graph), str(plan), "--problem", "joint", "--bandwidth", "1GB/s"])  # a flag wins
    assert rc == 2 and "contradict the verifier" in err, err


def test_the_heartbeat_never_counts_zero_ranks_working(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher's heartbeat names the ranks still working; ranks that end during its sleep are not reported as
    "0 of N rank(s) working" (seen as the ranks ended), while a heartbeat with ranks alive is still said."""
    from milp_partition.run import launch

    class Fake:
        returncode: int | None = None

        def poll(self) -> int | None:
            return self.returncode

    fakes = [Fake(), Fake()]
    sleeps = iter(range(1, 1000))

    def sleep(_s: float) -> None:  # both ranks end during the launcher's second sleep
        if next(sleeps) == 2:
            for f in fakes:
                f.returncode = 0

    started = iter(fakes)
    monkeypatch.setattr(launch, "_start", lambda fn, rank, error_dir, args: next(started))
    monkeypatch.setattr(launch.time, "sleep", sleep)
    monkeypatch.setattr(launch, "HEARTBEAT_S", 0.0)
    monkeypatch.setattr(launch, "stop_processes", lambda procs: None)  # nothing to stop: they ended
    said: list[str] = []
    launch.run_ranks(print, 2, (), str(tmp_path), progress=said.append)
    beats = [s for s in said if "working" in s]
    assert beats and all(not s.startswith("0 of") for s in beats), said
