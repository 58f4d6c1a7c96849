"""Timing one benchmark point: warm-up, an automatic inner count, the repeats."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

from milp_partition.calibration.backend import ArrayBackend
from milp_partition.calibration.settings import TimingSettings


def time_runs(backend: ArrayBackend, run: Callable[[int], object], settings: TimingSettings) -> tuple[float, ...]:
    """Seconds per run of ``run(i)`` (``i`` picks the rotating buffer), one value per timed sample.

    After ``settings.warmup`` untimed runs, one run is timed to choose how many runs a sample
    holds (at least ``min_sample_time_s`` long, at most ``max_inner`` runs); then
    ``settings.repeats`` samples are timed with the back-end's clock (CUDA events on a GPU)
    and divided by their run count.  The caller takes the median.
    """
    counter = 0

    def block(inner: int) -> Callable[[], None]:
        def go() -> None:
            nonlocal counter
            for _ in range(inner):
                run(counter)
                counter += 1

        return go

    for _ in range(settings.warmup):
        block(1)()
    backend.synchronize()
    first = backend.time_block(block(1), settings.cpu_clock)
    inner = 1
    if first < settings.min_sample_time_s:
        inner = min(settings.max_inner, max(1, math.ceil(settings.min_sample_time_s / max(first, 1e-9))))
    return tuple(backend.time_block(block(inner), settings.cpu_clock) / inner for _ in range(settings.repeats))


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The median wall time of ``max(repeats, 1)`` calls of ``fn`` (``time.perf_counter``), in seconds."""
    samples = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
