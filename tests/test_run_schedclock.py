"""run/schedclock.py: a step's seconds on a core and waiting for one (what the machine's other work took from a run)."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import pytest

from milp_partition.run import schedclock
from milp_partition.run.schedclock import StepSched, thread_times


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_step_of_work_is_on_a_core_and_a_sleep_is_not() -> None:
    sched = StepSched()
    sched.start()
    _spin(0.05)
    sched.stop()
    sched.start()
    time.sleep(0.05)  # asleep: neither on a core nor in the run queue
    sched.stop()
    assert len(sched.cpu_s) == len(sched.runqueue_wait_s) == 2
    # on a core at most the wall seconds of the step; a spin is on a core or waiting for one
    spin_cpu, sleep_cpu = sched.cpu_s
    assert 0 < spin_cpu <= 0.05 + 0.01
    assert sleep_cpu < spin_cpu
    if not math.isnan(sched.runqueue_wait_s[0]):
        assert all(w >= 0 for w in sched.runqueue_wait_s)
        assert spin_cpu + sched.runqueue_wait_s[0] >= 0.05 * 0.9  # the spin's wall: on a core, or runnable and waiting


def test_another_threads_work_is_not_counted() -> None:
    # the clock is the calling thread's: a second thread's spin leaves it (nearly) idle while it waits to join
    sched = StepSched()
    other = threading.Thread(target=_spin, args=(0.05,))
    sched.start()
    other.start()
    other.join()
    sched.stop()
    assert sched.cpu_s[0] < 0.025


def test_without_schedstat_the_wait_is_nan_and_the_cpu_still_counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(schedclock, "SCHEDSTAT", str(tmp_path / "missing"))
    cpu, wait = thread_times()
    assert cpu > 0 and math.isnan(wait)


def test_the_wait_is_schedstats_second_field(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "schedstat"
    fake.write_text("999 2500000000 7\n")
    monkeypatch.setattr(schedclock, "SCHEDSTAT", str(fake))
    assert thread_times()[1] == pytest.approx(2.5)


def test_run_json_notes_a_step_that_waited_for_a_core() -> None:
    from milp_partition.run.engine import WAIT_NOTE_SHARE, waited_note

    quiet = [{"rank": 0, "step_runqueue_wait_s": [0.5, 0.0, 0.001, 0.0]}, {"rank": 1, "step_runqueue_wait_s": [0.0] * 4}]
    assert waited_note(quiet, 1, 0.1) == []  # the warm-up's wait is left out; 0 over the rest
    busy = [quiet[0], {"rank": 1, "step_runqueue_wait_s": [0.0, 0.03, 0.04, 0.05]}]
    (note,) = waited_note(busy, 1, 0.1)
    assert note.startswith("rank 1 waited") and "40%" in note
    edge = [{"rank": 0, "step_runqueue_wait_s": [0.0, WAIT_NOTE_SHARE * 0.1]}]
    assert waited_note(edge, 1, 0.1) == []  # at the share: no note
    assert waited_note([{"rank": 0, "step_runqueue_wait_s": [float("nan")] * 3}], 1, 0.1) == []  # not measured
    assert waited_note([{"rank": 0}], 1, 0.1) == []  # a rank's result written before the wait was measured
