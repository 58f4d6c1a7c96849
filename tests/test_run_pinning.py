"""run/pinning.py: each CPU rank on cores of its own when the machine has them (no timing asserted)."""

from __future__ import annotations

import os

import pytest

from milp_partition.run.pinning import pin_rank, rank_cores


def test_each_rank_gets_its_own_block_of_cores() -> None:
    cores = {0, 2, 5, 7}
    got = [rank_cores(r, 4, 1, cores) for r in range(4)]
    assert got == [{0}, {2}, {5}, {7}]  # in order, one each, none shared
    assert [rank_cores(r, 2, 2, cores) for r in range(2)] == [{0, 2}, {5, 7}]  # threads: a block each
    for world in range(1, 5):
        for threads in range(1, 5):
            blocks = [rank_cores(r, world, threads, cores) for r in range(world)]
            if world * threads <= len(cores):
                assert all(b is not None and len(b) == threads for b in blocks)
                assert len(set().union(*blocks)) == world * threads  # disjoint
            else:
                assert blocks == [None] * world  # more rank-threads than cores: left to the scheduler


def test_nonsense_is_not_pinned() -> None:
    assert rank_cores(2, 2, 1, {0, 1}) is None and rank_cores(0, 0, 1, {0}) is None and rank_cores(0, 1, 0, {0}) is None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no sched_setaffinity here")
def test_pin_rank_pins_the_calling_process() -> None:
    before = os.sched_getaffinity(0)
    try:
        got = pin_rank(0, 1, 1)
        assert got == [min(before)] and os.sched_getaffinity(0) == {min(before)}
        os.sched_setaffinity(0, before)
        assert pin_rank(0, len(before) + 1, 1) is None and os.sched_getaffinity(0) == before  # too few cores
    finally:
        os.sched_setaffinity(0, before)
