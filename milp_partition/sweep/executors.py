"""Where a sweep's runs go: local worker processes (the default) or a Ray cluster; progress on stderr.

Every executor yields one row per job as runs end, in the order they end.  A run
that raises, or whose worker dies, yields an ``error`` row: no job is lost, and the
other jobs' rows are those they would have had (a local pool that a dying worker
broke runs the jobs it still held again, each alone; Ray replaces the worker).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TextIO

from milp_partition.backends.lifetime import die_with_parent
from milp_partition.errors import InputError
from milp_partition.sweep.jobs import EXACT, GapJob
from milp_partition.sweep.registry import execute

EXECUTORS: tuple[str, ...] = ("local", "ray")


@dataclass(frozen=True)
class ExecutorSettings:
    """How to run the jobs.

    Attributes
    ----------
    kind
        ``"local"`` (processes on this machine) or ``"ray"``.
    workers
        Local worker processes (1: runs in this process, one after another).
    address
        Ray cluster address (``None``: start a local Ray instance for the sweep).
    ray_num_cpus
        CPUs of a local Ray instance started here (``None``: Ray's default, all cores).
    """

    kind: str = "local"
    workers: int = 1
    address: str | None = None
    ray_num_cpus: int | None = None


class Progress:
    """Runs done, running and failed, and the time elapsed, on one stderr line (a new line per event off a terminal)."""

    def __init__(self, total: int, *, enabled: bool, stream: TextIO | None = None) -> None:
        self.total, self.enabled = total, enabled and total > 0
        self.stream = stream if stream is not None else sys.stderr
        self.done = self.failed = self.running = 0
        self.start = time.monotonic()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, *, running: int, finished: dict[str, str] | None = None) -> None:
        """Record a finished row (if any) and the number of runs in flight; redraw."""
        self.running = running
        if finished is not None:
            self.done += 1
            self.failed += finished.get("status") == "error"
        if not self.enabled:
            return
        label = f" last: {finished['instance']} {finished['method']} {finished['status']}" if finished else ""
        line = (
            f"[gap] done {self.done}/{self.total}, running {self.running}, failed {self.failed}, "
            f"elapsed {time.monotonic() - self.start:.1f}s{label}"
        )
        if self.tty:
            self.stream.write("\r" + line[:120].ljust(120))
        elif finished is not None:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()


#: What runs one job where the executor puts it: ``job -> CSV row`` (picklable; the default is the registry's).
Runner = Callable[[GapJob], dict[str, str]]


def run_jobs(
    jobs: list[GapJob], settings: ExecutorSettings, progress: Progress, runner: Runner = execute
) -> Iterator[dict[str, str]]:
    """Run ``jobs`` with the chosen executor; yield each row as its run ends.

    ``runner`` runs one job in a worker; tests pass one that kills its worker to check that
    the death becomes an ``error`` row.
    """
    if settings.kind == "local":
        yield from _run_local(jobs, settings.workers, progress, runner)
    elif settings.kind == "ray":
        yield from _run_ray(jobs, settings, progress, runner)
    else:
        raise InputError(f"unknown executor {settings.kind!r}; known: {', '.join(EXECUTORS)}", where="--executor")


def _died(job: GapJob, what: str) -> dict[str, str]:
    return job.row(status="error", message=f"the run did not return: {what}")


def _run_local(jobs: list[GapJob], workers: int, progress: Progress, runner: Runner) -> Iterator[dict[str, str]]:
    if workers == 1:
        for i, job in enumerate(jobs):
            progress.update(running=1)
            row = runner(job)
            yield row  # the caller saves it before this generator goes on: a row shown as done is a saved row
            progress.update(running=0 if i == len(jobs) - 1 else 1, finished=row)
        return
    # a worker that dies breaks the whole pool: every job it still held (running or queued) fails with it, so those
    # jobs run again afterwards, each in a process of its own; the one that kills its worker again is the error row
    broken: list[GapJob] = []
    pool = ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent)  # workers die with the sweep
    pending: dict[Future, GapJob] = {}
    try:
        pending = {pool.submit(runner, job): job for job in jobs}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                job = pending.pop(fut)
                try:
                    row = fut.result()
                except BrokenProcessPool:
                    broken.append(job)
                    continue
                except Exception as exc:  # e.g. a result that cannot be pickled
                    row = _died(job, f"{type(exc).__name__}: {exc}")
                yield row
                progress.update(running=min(workers, len(pending)), finished=row)
    except GeneratorExit:  # the caller stopped reading
        _stop_pool(pool)
        raise
    except BaseException:  # Ctrl-C or SIGTERM: keep the rows that ended, stop the runs in flight at once
        for fut in pending:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                yield fut.result()
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    for i, job in enumerate(broken):
        progress.update(running=1)
        with ProcessPoolExecutor(max_workers=1) as alone:
            try:
                row = alone.submit(runner, job).result()
            except BrokenProcessPool:
                row = _died(job, "its worker process died")
            except Exception as exc:
                row = _died(job, f"{type(exc).__name__}: {exc}")
        yield row
        progress.update(running=0 if i == len(broken) - 1 else 1, finished=row)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool's workers now (SIGTERM, then SIGKILL after 2 s) instead of waiting for their runs to end; their
    CBC children die with them."""
    processes = list(getattr(pool, "_processes", {}).values())  # the standard library keeps them here
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + 2.0
    for proc in processes:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=1.0)


def _run_ray(jobs: list[GapJob], settings: ExecutorSettings, progress: Progress, runner: Runner) -> Iterator[dict[str, str]]:
    try:
        import ray
    except ImportError:
        raise InputError(
            "--executor ray needs Ray: pip install 'milp-partition[ray]' (or pip install ray)", where="--executor"
        ) from None
    started = False
    if not ray.is_initialized():
        if settings.address:
            ray.init(address=settings.address, log_to_driver=False)
        else:
            ray.init(num_cpus=settings.ray_num_cpus, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(max_retries=0)(runner)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # an exact run asks for its solver threads, capped at the cluster's CPUs (more could never be scheduled)
        refs = {
            remote.options(num_cpus=min(cpus, job.threads) if job.method == EXACT else 1).remote(job): job  # type: ignore[attr-defined]
            for job in jobs
        }
        pending = list(refs)
        progress.update(running=min(cpus, len(pending)))
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                job = refs[ref]
                try:
                    row = ray.get(ref)
                except Exception as exc:  # RayTaskError, WorkerCrashedError, ...
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    row = _died(job, f"Ray: {type(exc).__name__}: {first[:200]}")
                yield row
                progress.update(running=min(cpus, len(pending)), finished=row)
    finally:
        if started:
            ray.shutdown()
