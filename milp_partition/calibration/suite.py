"""The microbenchmark suite: plan the points, check each kernel, time it, keep every repeat.

One code path over ``backend.xp``: matrix products per dtype and size, streaming copy and
scale-add, an almost-empty kernel, a reduction, host<->device and device-to-device copies,
and an NCCL all-reduce where there are two or more GPUs.  Each point allocates its own
buffers (``rotation_buffers`` of each operand, fewer when large), checks the kernel's result
against a float64 host reference, then times it (:func:`time_runs`) and records a
:class:`Measurement` with the median and every repeat.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from milp_partition.calibration import kernels
from milp_partition.calibration.backend import ArrayBackend
from milp_partition.calibration.blas_threads import limit_blas_threads
from milp_partition.calibration.profile import Measurement
from milp_partition.calibration.settings import SuiteSettings
from milp_partition.calibration.timing import time_runs

#: The scalar of the scale-add kernel (``out = SCALE_ADD_ALPHA * x + y``).
SCALE_ADD_ALPHA = 0.5
#: Element type of the streaming, reduction, empty and all-reduce kernels.
STREAM_DTYPE = "float32"

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Task:
    """One planned benchmark point; ``run()`` checks, times and returns its measurement."""

    benchmark: str
    label: str
    size: int
    run: Callable[[], Measurement]

    @property
    def title(self) -> str:
        return f"{self.benchmark} {self.label} {self.size}"


@dataclass(frozen=True)
class SuiteResult:
    """Every measurement of one suite run, and notes on what was skipped and why."""

    measurements: tuple[Measurement, ...]
    notes: tuple[str, ...]
    seconds: float


def _rotation(settings: SuiteSettings, nbytes: int) -> int:
    return max(1, min(settings.rotation_buffers, settings.rotation_max_bytes // max(nbytes, 1)))


def _measurement(benchmark: str, label: str, size: int, flops: float, nbytes: float, times: tuple[float, ...]) -> Measurement:
    return Measurement(benchmark, label, size, float(flops), float(nbytes), float(statistics.median(times)), times)


def _host64(backend: ArrayBackend, a: Any) -> np.ndarray:
    """A float64 host copy of a device array of any floating dtype."""
    return backend.to_host(a.astype(backend.xp.float32)).astype(np.float64)


class _Planner:
    """Builds the task list of one suite run; each task closes over its own sizes."""

    def __init__(self, backend: ArrayBackend, settings: SuiteSettings) -> None:
        self.backend = backend
        self.settings = settings
        self.rng = np.random.default_rng(settings.seed)
        self.notes: list[str] = []

    # -- matrix products -----------------------------------------------------------------
    def gemm_tasks(self) -> list[Task]:
        tasks = []
        for dtype in self.settings.gemm_dtypes:
            problem = self.backend.dtype_problem(dtype)
            if problem is not None:
                self.notes.append(f"gemm {dtype}: skipped, {problem}")
                continue
            sizes = self.settings.gemm_sizes
            if self.backend.name == "numpy" and dtype in ("float16", "bfloat16"):
                limit = self.settings.cpu_half_precision_max_size
                sizes = tuple(n for n in sizes if n <= limit)
                self.notes.append(
                    f"gemm {dtype}: orders above {limit} skipped, NumPy's {dtype} matmul has no BLAS path (about 1 GFLOP/s)"
                )
            tasks += [Task("gemm", dtype, n, self._gemm(dtype, n)) for n in sizes]
        return tasks

    def _gemm(self, dtype: str, n: int) -> Callable[[], Measurement]:
        def go() -> Measurement:
            xp, s = self.backend.xp, self.settings
            dt = self.backend.dtype(dtype)
            itemsize = int(xp.empty(0, dtype=dt).itemsize)
            nb = _rotation(s, n * n * itemsize)
            bufs = [
                (
                    xp.asarray(self.rng.standard_normal((n, n), dtype=np.float32)).astype(dt),
                    xp.asarray(self.rng.standard_normal((n, n), dtype=np.float32)).astype(dt),
                    xp.empty((n, n), dtype=dt),
                )
                for _ in range(nb)
            ]
            a, b, c = bufs[0]
            kernels.gemm(xp, a, b, c)
            kernels.check_gemm(
                _host64(self.backend, a),
                _host64(self.backend, b),
                _host64(self.backend, c),
                dtype,
                s.check_tolerance_factor,
                self.rng,
            )

            def run(i: int) -> object:
                a, b, c = bufs[i % nb]
                return kernels.gemm(xp, a, b, c)

            times = time_runs(self.backend, run, s.timing)
            return _measurement("gemm", dtype, n, 2.0 * n**3, 3.0 * n * n * itemsize, times)

        return go

    # -- streaming, reduction, empty ------------------------------------------------------
    def stream_tasks(self) -> list[Task]:
        sizes = self.settings.stream_sizes_bytes
        makers = {"copy": self._copy, "scale_add": self._scale_add, "reduction": self._reduction}
        unknown = set(self.settings.stream_kernels) - set(makers)
        if unknown or "copy" not in self.settings.stream_kernels:
            raise ValueError(
                f"stream_kernels must include 'copy' and name only {', '.join(makers)}; got {self.settings.stream_kernels}"
            )
        tasks = [Task(k, STREAM_DTYPE, b, makers[k](b)) for k in self.settings.stream_kernels for b in sizes]
        return [*tasks, Task("empty", STREAM_DTYPE, 1, self._empty())]

    def _vectors(self, nbytes: int, count: int) -> tuple[int, list[list[Any]]]:
        """``count`` random vectors of ``nbytes`` bytes, and copies of them for each rotation buffer."""
        xp = self.backend.xp
        n = max(1, nbytes // np.dtype(STREAM_DTYPE).itemsize)
        nb = _rotation(self.settings, n * np.dtype(STREAM_DTYPE).itemsize)
        first = [xp.asarray(self.rng.random(n, dtype=np.float32)) for _ in range(count)]
        return nb, [first] + [[xp.array(v, copy=True) for v in first] for _ in range(nb - 1)]

    def _check_indices(self, n: int) -> slice | np.ndarray:
        """Every element, or a random sample of ``check_max_elements`` of them for large arrays."""
        k = self.settings.check_max_elements
        return slice(None) if n <= k else self.rng.integers(0, n, k)

    def _copy(self, nbytes: int) -> Callable[[], Measurement]:
        def go() -> Measurement:
            xp = self.backend.xp
            nb, bufs = self._vectors(nbytes, 2)
            src, dst = bufs[0]
            kernels.copy(xp, src, dst)
            kernels.check_equal(f"copy {nbytes} B", self.backend.to_host(dst), self.backend.to_host(src))
            times = time_runs(self.backend, lambda i: kernels.copy(xp, *bufs[i % nb]), self.settings.timing)
            return _measurement("copy", STREAM_DTYPE, nbytes, 0.0, 2.0 * src.nbytes, times)

        return go

    def _scale_add(self, nbytes: int) -> Callable[[], Measurement]:
        def go() -> Measurement:
            xp, s = self.backend.xp, self.settings
            nb, bufs = self._vectors(nbytes, 3)
            x, y, out = bufs[0]
            kernels.scale_add(xp, x, y, out, SCALE_ADD_ALPHA)
            xs, ys, outs = (self.backend.to_host(v) for v in (x, y, out))
            idx = self._check_indices(xs.size)
            ref = SCALE_ADD_ALPHA * xs[idx].astype(np.float64) + ys[idx]
            kernels.check_close(f"scale_add {nbytes} B", outs[idx], ref, STREAM_DTYPE, s.check_tolerance_factor)

            def run(i: int) -> object:
                x, y, out = bufs[i % nb]
                return kernels.scale_add(xp, x, y, out, SCALE_ADD_ALPHA)

            times = time_runs(self.backend, run, s.timing)
            return _measurement("scale_add", STREAM_DTYPE, nbytes, 2.0 * x.size, 3.0 * x.nbytes, times)

        return go

    def _reduction(self, nbytes: int) -> Callable[[], Measurement]:
        def go() -> Measurement:
            xp, s = self.backend.xp, self.settings
            nb, bufs = self._vectors(nbytes, 1)
            (x,) = bufs[0]
            got = kernels.reduction(xp, x)
            ref = np.sum(self.backend.to_host(x), dtype=np.float64)
            kernels.check_close(
                f"reduction {nbytes} B",
                self.backend.to_host(got).reshape(1),
                np.array([ref]),
                STREAM_DTYPE,
                s.check_tolerance_factor,
                x.size,
            )
            times = time_runs(self.backend, lambda i: kernels.reduction(xp, bufs[i % nb][0]), s.timing)
            return _measurement("reduction", STREAM_DTYPE, nbytes, float(x.size), float(x.nbytes), times)

        return go

    def _empty(self) -> Callable[[], Measurement]:
        def go() -> Measurement:
            xp, s = self.backend.xp, self.settings
            nb, bufs = self._vectors(4, 2)
            x, out = bufs[0]
            kernels.empty(xp, x, out)
            kernels.check_close(
                "empty kernel", self.backend.to_host(out), _host64(self.backend, x) + 1, STREAM_DTYPE, s.check_tolerance_factor
            )
            times = time_runs(self.backend, lambda i: kernels.empty(xp, *bufs[i % nb]), s.timing)
            return _measurement("empty", STREAM_DTYPE, 1, 1.0, 2.0 * x.nbytes, times)

        return go

    # -- copies between memories -----------------------------------------------------------
    def transfer_tasks(self) -> list[Task]:
        tasks = []
        sizes = self.settings.transfer_sizes_bytes
        tasks += [Task("h2d", "host->0", b, self._transfer("h2d", b, 0, 0)) for b in sizes]
        tasks += [Task("d2h", "0->host", b, self._transfer("d2h", b, 0, 0)) for b in sizes]
        pairs = self.backend.device_pairs()
        if not pairs:
            tasks += [Task("d2d", "local", b, self._transfer("d2d", b, 0, 0)) for b in sizes]
        for i, j in pairs:
            tasks += [Task("d2d", f"{i}->{j}", b, self._transfer("d2d", b, i, j)) for b in sizes]
        return tasks

    def _transfer(self, kind: str, nbytes: int, src_dev: int, dst_dev: int) -> Callable[[], Measurement]:
        def go() -> Measurement:
            be, s = self.backend, self.settings
            nb = _rotation(s, nbytes)
            payload = self.rng.integers(0, 256, nbytes, dtype=np.uint8)
            if kind == "h2d":
                pairs = [(be.host_buffer(nbytes), be.device_buffer(nbytes, dst_dev)) for _ in range(nb)]
                for src, _ in pairs:
                    src[...] = payload
                copy_fn: Callable[[Any, Any], None] = lambda src, dst: be.h2d(dst, src)  # noqa: E731
            elif kind == "d2h":
                pairs = [(be.device_buffer(nbytes, src_dev), be.host_buffer(nbytes)) for _ in range(nb)]
                for src, _ in pairs:
                    be.h2d(src, payload)
                copy_fn = lambda src, dst: be.d2h(dst, src)  # noqa: E731
            else:
                pairs = [(be.device_buffer(nbytes, src_dev), be.device_buffer(nbytes, dst_dev)) for _ in range(nb)]
                for src, _ in pairs:
                    be.h2d(src, payload)
                copy_fn = lambda src, dst: be.d2d(dst, src)  # noqa: E731
            copy_fn(*pairs[0])
            be.synchronize()
            kernels.check_equal(f"{kind} {nbytes} B", be.to_host(pairs[0][1]), payload)
            times = time_runs(be, lambda i: copy_fn(*pairs[i % nb]), s.timing)
            label = {"h2d": f"host->{dst_dev}", "d2h": f"{src_dev}->host"}.get(
                kind, f"{src_dev}->{dst_dev}" if src_dev != dst_dev else "local"
            )
            return _measurement(kind, label, nbytes, 0.0, float(nbytes), times)

        return go

    def allreduce_tasks(self) -> list[Task]:
        p = self.backend.device_count
        if p < 2:
            self.notes.append(f"allreduce: not measured, {p} device; the ring model uses the d2d copy fit instead")
            return []
        if self.backend.allreduce_runner(1) is None:
            self.notes.append(
                "allreduce: not measured, NCCL (cupy.cuda.nccl) is unavailable; the ring model uses the d2d copy fit"
            )
            return []
        return [Task("allreduce", f"p={p}", b, self._allreduce(b, p)) for b in self.settings.allreduce_sizes_bytes]

    def _allreduce(self, nbytes: int, p: int) -> Callable[[], Measurement]:
        def go() -> Measurement:
            count = max(1, nbytes // np.dtype(STREAM_DTYPE).itemsize)
            runner = self.backend.allreduce_runner(count)
            assert runner is not None
            runner()
            self.backend.synchronize()
            runner.check()  # type: ignore[attr-defined]
            times = time_runs(self.backend, lambda i: runner(), self.settings.timing)
            return _measurement("allreduce", f"p={p}", nbytes, float(count * (p - 1)), float(count * 4), times)

        return go


def plan_suite(backend: ArrayBackend, settings: SuiteSettings) -> tuple[list[Task], list[str]]:
    """The tasks of one suite run, and notes on what is skipped and why."""
    planner = _Planner(backend, settings)
    tasks = planner.gemm_tasks() + planner.stream_tasks() + planner.transfer_tasks() + planner.allreduce_tasks()
    return tasks, planner.notes


def run_suite(backend: ArrayBackend, settings: SuiteSettings, progress: Progress | None = None) -> SuiteResult:
    """Run every task of :func:`plan_suite`; ``progress(done, total, title)`` is called before each.

    Raises
    ------
    KernelCheckError
        A kernel's result differs from its reference; nothing is calibrated.
    """
    import time

    start = time.perf_counter()
    measurements = []
    cpu = backend.name == "numpy"
    with limit_blas_threads(settings.cpu_blas_threads if cpu else None) as (limited, blas_note):
        if cpu and settings.timing.cpu_clock == "thread" and not (limited and settings.cpu_blas_threads == 1):
            settings = replace(settings, timing=replace(settings.timing, cpu_clock="wall"))
        tasks, notes = plan_suite(backend, settings)
        notes.append(blas_note)
        notes.append(
            "clock: CUDA events"
            if not cpu
            else "clock: CPU time of the calling thread (time.thread_time; leaves out other processes' time slices)"
            if settings.timing.cpu_clock == "thread"
            else "clock: wall time (time.perf_counter)"
        )
        for k, task in enumerate(tasks):
            if progress is not None:
                progress(k, len(tasks), task.title)
            measurements.append(task.run())
    if progress is not None:
        progress(len(tasks), len(tasks), "done")
    return SuiteResult(tuple(measurements), tuple(notes), time.perf_counter() - start)
