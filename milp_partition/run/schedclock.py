"""Where a rank's step went: on a core, or waiting for one (Linux's ``/proc/thread-self/schedstat``).

A step's wall seconds are the rank's own work plus the time its thread was runnable but another process held the
core (the run-queue wait) plus the time it slept (waiting for a message, a barrier). On a machine shared with other
work the run-queue wait is what makes one launch of a plan slower than another while each launch is steady (the
other work starts and stops between launches, not within one): :class:`StepSched` records it per step, so run.json
says how much of a measured step was the machine's and not the plan's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

#: This thread's scheduler statistics: nanoseconds on a core, nanoseconds runnable and waiting, time slices.
SCHEDSTAT = "/proc/thread-self/schedstat"


def thread_times() -> tuple[float, float]:
    """This thread's seconds on a core (:func:`time.thread_time`) and seconds runnable but waiting in the run queue
    since it started (:data:`SCHEDSTAT`'s second field; NaN where that is missing: not Linux, or a kernel without it).

    The on-core seconds are not :data:`SCHEDSTAT`'s first field: the kernel adds the running slice to that one only at a
    tick or a switch (4 ms at 250 Hz, a third of a small plan's step); ``thread_time`` includes it. The wait is whole
    whenever the thread runs (it is added as the thread gets its core).
    """
    cpu = time.thread_time()
    try:
        with open(SCHEDSTAT) as fh:
            wait_ns = fh.read().split()[1]
        return cpu, int(wait_ns) / 1e9
    except (OSError, ValueError, IndexError):
        return cpu, math.nan


@dataclass
class StepSched:
    """Per step, the seconds the calling thread spent on a core (``cpu_s``) and runnable but waiting for one
    (``runqueue_wait_s``): :meth:`start` before the step, :meth:`stop` after it, from the same thread."""

    cpu_s: list[float] = field(default_factory=list)
    runqueue_wait_s: list[float] = field(default_factory=list)
    _at: tuple[float, float] = (0.0, 0.0)

    def start(self) -> None:
        self._at = thread_times()

    def stop(self) -> None:
        cpu, wait = thread_times()
        self.cpu_s.append(cpu - self._at[0])
        self.runqueue_wait_s.append(wait - self._at[1])
