"""Start one process per device, watch them, collect their results, run the reference.

The workers are this process's children (``python -c`` :data:`_BOOT`, the call pickled to a file in the run's
private temporary folder). Each asks for SIGKILL when this process dies (``PR_SET_PDEATHSIG`` on Linux) as the first
thing it runs, before importing the project or torch, and exits at once if its parent died before that; it ignores
SIGINT (the launcher stops it) and, through :func:`_rank_main`, writes a failure's one-line summary and traceback
for the launcher instead of printing it. The launcher (:func:`run_ranks`) starts them one by one and, on any
exception (Ctrl-C and SIGTERM arrive as :class:`KeyboardInterrupt`, see :mod:`milp_partition.cli.dispatch`), a
failed worker or the end, stops every one started so far (SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`), during
the spawn too: no worker outlives the run.

On Linux (:data:`FORK_SERVER`) the workers are forked from one server process per launcher, multiprocessing's
fork server, which imports torch, its distributed and pipelining packages and the runtime once
(:data:`RANK_SERVER_PRELOAD`: about 4.5 CPU s that every fresh interpreter would pay again), so a run of ``K`` ranks
imports torch once instead of ``K`` times, and later runs of the same launcher not at all.  The server imports only
(no tensor work, no thread pool, no CUDA), so forking from it is safe; each worker then takes the launcher's working
directory, ``sys.path`` and environment as of its start.  The server ends when the launcher ends (it reads the
launcher's end of a pipe); a worker asks for SIGKILL when the server dies, and exits at once if the launcher is gone
before that.  Elsewhere each worker is a fresh interpreter (:data:`_BOOT`).

:func:`host_limits` says how many ranks the machine can host (cores, memory, GPUs); :func:`check_host` refuses a
plan beyond it unless forced.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import context as mp_context
from multiprocessing import forkserver, popen_forkserver, spawn
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError
from milp_partition.io.atomic import write_atomic
from milp_partition.run.engine import reference, summarise, uses_cuda, worker
from milp_partition.run.predict import combine, predict_step
from milp_partition.run.spec import RunSpec

#: Seconds a worker gets to end after SIGTERM before SIGKILL.
STOP_GRACE_S = 2.0
#: Seconds between the launcher's checks of its workers (and between heartbeat lines, :data:`HEARTBEAT_S`).
POLL_S = 0.2
#: Seconds between progress lines while the ranks work.
HEARTBEAT_S = 10.0
#: Memory a CPU rank needs at least, besides its model (torch, gloo, the interpreter): about 400 MiB resident
#: (292 MiB measured after importing torch 2.13 and its distributed packages, before the process group and the model).
RANK_OVERHEAD_BYTES = 400 * 2**20
#: Ranks per core (each with its ``--threads``) a machine may host without ``--oversubscribe``.
RANKS_PER_CORE = 2
#: Whether the workers are forked from the rank server (module docstring; Linux only), else each started as a fresh
#: interpreter.
FORK_SERVER = sys.platform.startswith("linux")
#: What the rank server imports once before it forks the workers (a module it cannot import is left to the workers).
RANK_SERVER_PRELOAD = ("torch", "torch.distributed", "torch.distributed.pipelining", "milp_partition.run.engine")


class WorkerFailed(RuntimeError):
    """A worker process failed: its rank, and the exception's last line (its traceback is in ``details``)."""

    def __init__(self, rank: int, summary: str, details: str = "") -> None:
        self.rank = rank
        self.details = details
        super().__init__(f"rank {rank} failed: {summary}")


@dataclass(frozen=True)
class HostLimits:
    """What this machine offers a run: cores, available memory, and GPUs (0 without CUDA)."""

    cores: int
    memory_available_bytes: int | None
    gpus: int


def host_limits() -> HostLimits:
    """Cores this process may use, ``MemAvailable`` (Linux; ``None`` elsewhere) and CUDA's GPU count."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    memory = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    memory = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    gpus = 0
    try:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        pass
    return HostLimits(cores, memory, gpus)


def check_host(ranks: int, threads: int, host: HostLimits, flag: str = "--oversubscribe") -> None:
    """Raise :class:`InputError` when ``ranks`` processes (of ``threads`` threads) are more than ``host`` can hold.

    On GPUs (a GPU per rank) the GPUs decide; on the CPU at most :data:`RANKS_PER_CORE` rank-threads per core,
    and :data:`RANK_OVERHEAD_BYTES` of available memory per rank.
    """
    if host.gpus >= ranks:
        return
    if ranks * threads > RANKS_PER_CORE * host.cores:
        raise InputError(
            f"the plan needs {ranks} processes of {threads} thread(s) and this machine has {host.cores} core(s) "
            f"(at most {RANKS_PER_CORE} threads a core) and {host.gpus} GPU(s): run a plan of fewer devices, or "
            f"give {flag} to start them anyway",
            where="plan",
        )
    if host.memory_available_bytes is not None and ranks * RANK_OVERHEAD_BYTES > host.memory_available_bytes:
        raise InputError(
            f"the plan needs {ranks} processes of about {RANK_OVERHEAD_BYTES // 2**20} MiB each and "
            f"{host.memory_available_bytes / 2**30:.1f} GiB is available: run a plan of fewer devices, or give {flag}",
            where="plan",
        )


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when its parent dies; exit now when it died already (before this was set)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _rank_main(fn: Callable[..., None], rank: int, parent: int, error_dir: str, args: tuple[Any, ...]) -> None:
    """A worker process: tied to the launcher's life, deaf to Ctrl-C (the launcher stops it); a failure is written."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        fn(rank, *args)
    except BaseException as exc:  # SystemExit from the model's code too: the launcher reports it
        summary = f"{type(exc).__name__}: {exc}".splitlines()[0][:500] if str(exc) else type(exc).__name__
        if isinstance(exc, SystemExit):
            summary = f"the model's code called sys.exit({exc.code!r})"
        report = json.dumps({"summary": summary, "traceback": traceback.format_exc()})
        write_atomic(Path(error_dir, f"rank{rank}.error"), report, what="the worker's error")
        os._exit(1)


#: What a worker process runs first (``python -c``): the parent-death signal and the parent check before any import
#: of the project or of torch (milliseconds after the start, not the seconds of those imports), Ctrl-C ignored, then
#: the pickled call (:func:`_rank_main`) with the launcher's ``sys.path``.
_BOOT = """\
import os, signal, sys
try:
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[2]):
    os._exit(1)
signal.signal(signal.SIGINT, signal.SIG_IGN)
import pickle
with open(sys.argv[1], "rb") as fh:
    path, payload = pickle.load(fh)
sys.path[:0] = [p for p in path if p not in sys.path]
fn, rank, parent, error_dir, args = pickle.loads(payload)
from milp_partition.run.launch import _rank_main
_rank_main(fn, rank, parent, error_dir, args)
"""


class _Forked:
    """A worker forked by the rank server, seen as the :class:`subprocess.Popen` of a fresh one is (``poll``,
    ``returncode``, ``terminate``, ``kill``, ``wait``: what :func:`stop_processes` and :func:`_failure` call)."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc
        self.pid = proc.pid

    @property
    def returncode(self) -> int | None:
        code: int | None = self.proc.exitcode
        return code

    def poll(self) -> int | None:
        return self.returncode

    def terminate(self) -> None:
        self.proc.terminate()

    def kill(self) -> None:
        self.proc.kill()

    def wait(self, timeout: float | None = None) -> int:
        self.proc.join(timeout)
        code = self.returncode
        if code is None:
            raise subprocess.TimeoutExpired(f"rank worker {self.pid}", timeout or 0.0)
        return code


Worker = subprocess.Popen[bytes] | _Forked


class _RankPopen(popen_forkserver.Popen):  # type: ignore[misc]
    """The fork server's launch of a worker without the launcher's main module in its preparation data (a worker
    needs none of it: its call names a module-level function, and a launcher script without the
    ``if __name__ == "__main__"`` guard would start its work again in every worker)."""

    def _launch(self, process_obj: Any) -> None:
        real = spawn.get_preparation_data

        def without_main(name: str) -> dict[str, Any]:
            data: dict[str, Any] = real(name)
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
            return data

        spawn.get_preparation_data = without_main  # read once, in this call, on this thread
        try:
            super()._launch(process_obj)  # type: ignore[misc]
        finally:
            spawn.get_preparation_data = real


class _RankProcess(mp_context.ForkServerProcess):  # type: ignore[misc]
    """A worker forked by the rank server (:class:`_RankPopen`)."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        forkserver.set_forkserver_preload(list(RANK_SERVER_PRELOAD))  # read when the server starts (the first worker)
        return _RankPopen(process_obj)


def _forked_main(call: str, launcher: int, env: dict[str, str]) -> None:
    """A worker forked by the rank server: tied to the server's life (which ends with the launcher's: the worker
    closes its copy of the server's client pipe), gone at once when the launcher is; the launcher's environment; then
    its call as :data:`_BOOT` reads it."""
    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server: Any = forkserver._forkserver
    alive = getattr(server, "_forkserver_alive_fd", None)
    if alive is not None:  # the server's "a client lives" pipe: held here, it would keep the server (and so this) alive
        os.close(alive)
        server._forkserver_alive_fd = None
    _die_with_parent(parent)
    try:
        os.kill(launcher, 0)
    except ProcessLookupError:
        os._exit(1)
    os.environ.clear()
    os.environ.update(env)
    with open(call, "rb") as fh:
        path, payload = pickle.load(fh)
    sys.path[:0] = [p for p in path if p not in sys.path]
    fn, rank, _launcher, error_dir, args = pickle.loads(payload)
    _rank_main(fn, rank, parent, error_dir, args)


def _start(fn: Callable[..., None], rank: int, error_dir: str, args: tuple[Any, ...]) -> Worker:
    """Start the worker of ``rank`` (forked by the rank server, else :data:`_BOOT`): its call is pickled to a file in
    ``error_dir``."""
    payload = pickle.dumps((fn, rank, os.getpid(), error_dir, args))
    call = Path(error_dir, f"rank{rank}.call")
    write_atomic(call, pickle.dumps((list(sys.path), payload)), what="the worker's call")
    if FORK_SERVER:
        proc = _RankProcess(target=_forked_main, args=(str(call), os.getpid(), dict(os.environ)))
        proc.start()
        return _Forked(proc)
    return subprocess.Popen([sys.executable, "-c", _BOOT, str(call), str(os.getpid())])


def stop_processes(procs: list[Worker], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM every live process of ``procs``, SIGKILL those still alive after ``grace_s``, and reap them all."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
    for p in procs:
        p.wait()


def _failure(procs: list[Worker], error_dir: str) -> WorkerFailed | None:
    """The first failed worker (by rank) as a :class:`WorkerFailed`, if any has failed."""
    for rank, p in enumerate(procs):
        if p.poll() not in (None, 0):
            path = Path(error_dir, f"rank{rank}.error")
            try:
                data = json.loads(path.read_text())
                return WorkerFailed(rank, str(data["summary"]), str(data["traceback"]))
            except (OSError, ValueError, KeyError):
                code = p.returncode or 0  # not None: poll() just gave it
                how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
                return WorkerFailed(rank, f"the process ended ({how})")
    return None


def run_ranks(
    fn: Callable[..., None], nprocs: int, args: tuple[Any, ...], error_dir: str, progress: Callable[[str], None] | None = None
) -> None:
    """Run ``fn(rank, *args)`` in ``nprocs`` worker processes and wait for all; stop them all on any failure.

    ``fn`` and ``args`` must pickle (``fn`` a module-level function); ``error_dir`` gets each worker's call and,
    on a failure, its summary and traceback.

    Raises
    ------
    WorkerFailed
        When a worker fails (the others are stopped first).
    KeyboardInterrupt
        On Ctrl-C or SIGTERM (every worker is stopped first, during the spawn too).
    """
    procs: list[Worker] = []
    say = progress or (lambda _: None)
    try:
        for rank in range(nprocs):
            procs.append(_start(fn, rank, error_dir, args))
            if _failure(procs, error_dir) is not None:
                break
        say(f"started {len(procs)} rank(s)")
        start = last = time.monotonic()
        while True:
            failed = _failure(procs, error_dir)
            if failed is not None:
                raise failed
            if all(p.poll() == 0 for p in procs):
                return
            time.sleep(POLL_S)
            if time.monotonic() - last >= HEARTBEAT_S:
                last = time.monotonic()
                alive = sum(p.poll() is None for p in procs)
                if alive:  # none alive: they ended during the sleep, and the next pass returns or raises
                    say(f"{alive} of {nprocs} rank(s) working, {last - start:.0f} s")
    finally:
        stop_processes(procs)


def _stderr(line: str) -> None:
    print(f"run: {line}", file=sys.stderr, flush=True)


def run_plan(
    spec: RunSpec,
    steps: int,
    *,
    seed: int = 0,
    threads: int = 1,
    warmup: int = 1,
    progress: Callable[[str], None] | None = None,
    pin: bool = True,
) -> dict[str, Any]:
    """Run ``spec`` for ``steps`` steps on ``spec.world_size`` processes, then in one process; run.json's dict.

    The predicted step (:func:`milp_partition.run.predict.predict_step`) is computed from what the workers
    measured before the plan's steps (all ranks at once): the whole model's layers at one micro-batch (the plan's b samples), torch's
    overheads on tiny modules, gloo's latency and bandwidth in their group.

    The rendezvous is a :class:`torch.distributed.FileStore` in a fresh temporary directory (no port to pick);
    the workers run under :func:`run_ranks` (none outlives this process; a failed one stops the others).
    ``progress`` gets a line at each phase (default: none). ``pin``: each CPU rank on cores of its own where the
    machine has a core for every rank's threads (:mod:`milp_partition.run.pinning`); ``False`` leaves placement to
    the scheduler.
    """
    import torch

    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    say = progress or (lambda _: None)
    world = spec.world_size
    cuda = uses_cuda(world)
    with tempfile.TemporaryDirectory(prefix="milp-run-") as tmp:
        store = os.path.join(tmp, "store")
        say(f"starting {world} rank(s) ({'nccl on GPUs' if cuda else 'gloo on the CPU'}), {steps} step(s) each")
        t0 = time.monotonic()
        run_ranks(worker, world, (world, store, spec, steps, seed, threads, tmp, cuda, pin), tmp, say)
        say(f"the ranks ran in {time.monotonic() - t0:.1f} s; the same steps in one process")
        ranks = [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(world)]
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ref = reference(spec, steps, seed, device="cuda:0" if cuda else None)  # where rank 0 ran
    finally:
        torch.set_num_threads(previous)
    layers, costs, links = combine(ranks)
    prediction = predict_step(spec, layers, costs, links).to_dict()
    prediction["layers"] = layers.to_dict()
    out = summarise(spec, ranks, ref, warmup, prediction)
    if not spec.uniform:
        out["notes"].append(
            "the predicted step (run/predict.py) prices every stage at the first stage's data- and tensor-parallel "
            "degrees: for stages with different degrees it is approximate"
        )
    if torch.cuda.is_available() and not cuda:
        gpus = torch.cuda.device_count()
        out["notes"].append(
            f"{world} ranks and {gpus} GPU{'s' * (gpus != 1)}: ran on the CPU with gloo (nccl takes one rank per GPU)"
        )
    out.update({"seed": seed, "threads_per_rank": threads, "pinned": pin and not cuda, "torch": torch.__version__})
    return out
