"""Stand-in worker functions for :func:`milp_partition.run.launch.run_ranks` tests (a light module: spawned
children import it)."""

from __future__ import annotations

import time


def fail_or_wait(rank: int, seconds: float) -> None:
    """A worker: rank 1 fails at once, the others wait (as a rank blocked in a collective would)."""
    if rank == 1:
        raise ValueError("a broken stage")
    time.sleep(seconds)
