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


def test_a_partner_answers_request_after_request_from_another_process() -> None:
    here = os.getpid()
    partner = beside.Partner(lambda x: (x * 2, os.getpid() != here))
    try:
        for x in (1, 5, 7):
            assert partner.ask(x)
            assert partner.answer(60.0) == (True, (2 * x, True))
    finally:
        partner.stop()
    assert not partner._process.is_alive()
    assert not partner.ask(3)  # stopped: nothing more is sent
    partner.stop()  # a second stop is harmless


def test_a_partners_error_is_raised_with_its_traceback() -> None:
    def broken(x: int) -> int:
        raise ValueError(f"no stage type {x}")

    partner = beside.Partner(broken)
    assert partner.ask(4)
    with pytest.raises(RuntimeError, match="no stage type 4"):
        partner.answer(60.0)
    assert not partner._process.is_alive()


def test_a_partner_that_dies_or_is_late_gives_no_answer() -> None:
    partner = beside.Partner(lambda x: os._exit(3))
    assert partner.ask(1)
    assert partner.answer(60.0) == (False, None)
    slow = beside.Partner(lambda x: time.sleep(600))
    assert slow.ask(1)
    assert slow.answer(0.2) == (False, None)
    assert not slow._process.is_alive()  # stopped, not left running


def test_no_time_limit_waits_for_the_answer() -> None:
    # a solve without a time limit hands an infinite timeout: the answer comes (the selectors cannot take inf)
    partner = beside.Partner(lambda x: (time.sleep(0.2), x + 1)[1])
    try:
        assert partner.ask(1)
        assert partner.answer(math.inf) == (True, 2)
    finally:
        partner.stop()
    assert beside.Beside(lambda: (time.sleep(0.2), 2.5)[1]).result(math.inf) == 2.5
