"""milp_partition.joint.beside: a computation in a forked process (the stage bound beside the column bound)."""

from __future__ import annotations

import math
import os
import time

import pytest

from milp_partition.joint import beside

pytestmark = pytest.mark.skipif(not beside.available(), reason="no fork start method here")


def test_the_childs_value_comes_back() -> None:
    here = os.getpid()
    side = beside.Beside(lambda: float(os.getpid() != here) + 0.5)  # computed in another process
    assert side.result(60.0) == 1.5


def test_an_error_in_the_child_is_raised_with_its_traceback() -> None:
    def broken() -> float:
        raise ValueError("no such stage")

    side = beside.Beside(broken)
    with pytest.raises(RuntimeError, match="no such stage"):
        side.result(60.0)


def test_no_answer_in_time_is_none_and_the_child_is_stopped() -> None:
    side = beside.Beside(lambda: time.sleep(600) or 1.0)
    assert side.result(0.2) is None
    assert not side._process.is_alive()  # stopped, not left running
    side.stop()  # a second stop is harmless


def test_a_child_that_dies_gives_none() -> None:
    side = beside.Beside(lambda: os._exit(3))
    assert side.result(60.0) is None


def test_values_are_floats() -> None:
    side = beside.Beside(lambda: math.inf)
    assert side.result(60.0) == math.inf
