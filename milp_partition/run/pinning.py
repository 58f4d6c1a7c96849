"""Each CPU rank on cores of its own (``os.sched_setaffinity``), when the machine has a core for every rank's threads.

Two ranks that wake each other (a gloo message, a barrier, DDP's all-reduce) are, left to the scheduler, often put on
one core: a woken thread goes where its waker runs. On a machine with other work the pair then shares one core while
the other runs someone else's process, and launches of one plan differ by the luck of that placement. Measured on the
Encoder's ``1x2x1 N=2`` plan (DDP over 2 ranks, 3 launches each, alternating, 1-minute load 10-12): unpinned 78.7,
32.2 and 43.1 ms a step, of which 15-58 ms each rank waited for a core; each rank on its own core 17.2, 14.2 and 11.5
ms, waiting 0.6-1.9 ms. One rank alone gains nothing (a pinned rank cannot leave a core another process holds), and
more ranks than cores are not pinned.
"""

from __future__ import annotations

import os


def rank_cores(rank: int, world: int, threads: int, available: set[int]) -> set[int] | None:
    """The cores of ``rank`` among ``available``: the ``rank``-th block of ``threads`` cores in order; ``None`` (no
    pinning) when ``world`` ranks of ``threads`` threads are more than the cores."""
    cores = sorted(available)
    if world < 1 or threads < 1 or not 0 <= rank < world or world * threads > len(cores):
        return None
    return set(cores[rank * threads : (rank + 1) * threads])


def pin_rank(rank: int, world: int, threads: int) -> list[int] | None:
    """Pin this process (and the threads it starts later) to :func:`rank_cores`; the cores, sorted, or ``None`` where
    it was not pinned (too few cores, or no ``sched_setaffinity`` on this system)."""
    try:
        available = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None
    cores = rank_cores(rank, world, threads, available)
    if cores is None:
        return None
    try:
        os.sched_setaffinity(0, cores)
    except OSError:
        return None
    return sorted(cores)
