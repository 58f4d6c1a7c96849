"""Progress lines are written whole: the chain's phase ticker runs in a thread beside the main thread's outcome lines,
and ``print`` writes a line's text and its newline in two calls, between which the other thread's line landed
(``[hetero] 70.2s  refinement; best verified 0.134534[hetero-bnb] no solution in 25.51s``)."""

from __future__ import annotations

import io
import sys
import time

import pytest

from milp_partition import chain
from milp_partition.backends.base import ProgressPrinter, write_line


class _Recording(io.StringIO):
    """A text stream that keeps each ``write`` call's text."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_write_line_is_one_write() -> None:
    stream = _Recording()
    write_line(stream, "[hetero]     5.0s  heuristics; best verified 0.1345")
    assert stream.calls == ["[hetero]     5.0s  heuristics; best verified 0.1345\n"]


def test_the_chain_says_each_line_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The main thread's outcome lines (``chain.say``) and the ticker's loop both go through one write per line."""
    stream = _Recording()
    monkeypatch.setattr(sys, "stderr", stream)
    chain.say(1.0, "[hetero-bnb] no solution in 25.51s: time limit reached")
    assert stream.calls == ["[hetero-bnb] no solution in 25.51s: time limit reached\n"]
    chain.say(None, "silent")  # progress off: nothing
    assert len(stream.calls) == 1


def test_the_backends_progress_thread_writes_whole_lines() -> None:
    """:class:`ProgressPrinter`'s thread, run for a few of its intervals: every write ends in a newline."""
    stream = _Recording()
    printer = ProgressPrinter("cbc", 0.001, stream)
    with printer:
        for _ in range(20000):  # until three lines are written (a bounded wait: nothing is timed)
            if len(stream.calls) >= 3:
                break
            time.sleep(0.001)
    assert stream.calls and all(c.endswith("\n") and c.count("\n") == 1 for c in stream.calls)
