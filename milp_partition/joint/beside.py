"""Computations in a second process, beside the main one, where a solve may use two threads.

:class:`Beside` computes one value there (the segment and stage bounds beside the heuristics); :class:`Partner` answers a
stream of requests (half of the column bound's pricing, round after round).  The process is forked (POSIX), so the
child has the caller's data and only requests and answers are pickled; where fork is not available
(:func:`available` is false) the caller does the work itself.  A child that raises hands the parent its traceback,
which is raised there (a bug stays visible); one that is stopped, interrupted or killed gives no answer.
"""

from __future__ import annotations

import math
import multiprocessing
import signal
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def available() -> bool:
    """Whether :class:`Beside` can run here (the fork start method exists)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _seconds(timeout_s: float) -> float | None:
    """A poll's timeout: ``None`` (no limit) for an infinite one, which the selectors cannot take."""
    return max(0.0, timeout_s) if math.isfinite(timeout_s) else None


def _default_stop() -> None:
    """In the child: the parent's stop (SIGTERM) ends it, whatever handler the parent had installed."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _end(process: Any) -> None:
    """Stop a child: SIGTERM, then SIGKILL if it still runs after five seconds."""
    if process.is_alive():
        process.terminate()
    process.join(5.0)
    if process.is_alive():
        process.kill()
        process.join(5.0)


class Beside(Generic[T]):
    """``fn()`` (picklable: a float, a tuple of them) computed in a forked process from now on; :meth:`result`
    waits for it (a :class:`Partner` asked once)."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._partner = Partner(lambda _request: fn())
        self._process = self._partner._process
        self._partner.ask(())

    def result(self, timeout_s: float) -> T | None:
        """The child's value, waiting at most ``timeout_s`` seconds (``None``: none by then); the child is stopped.

        Raises
        ------
        RuntimeError
            The function raised in the child (the message holds its traceback).
        """
        try:
            got, value = self._partner.answer(timeout_s)
        finally:
            self._partner.stop()
        return value if got else None

    def stop(self) -> None:
        """End the child (if it still runs) and release the pipe."""
        self._partner.stop()


def _serve(fn: Callable[[Any], Any], conn: Connection, other: Connection) -> None:
    _default_stop()
    other.close()  # the parent's end: the child sees end of file once the parent closes its own
    try:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return
            if request is None:
                return
            try:
                answer = ("ok", fn(request))
            except KeyboardInterrupt:
                return
            except BaseException:  # handed to the parent, which raises it (and stops this process)
                conn.send(("error", traceback.format_exc()))
                return
            conn.send(answer)
    finally:
        conn.close()


class Partner:
    """A forked process that answers requests with ``fn(request)``, one at a time, until stopped.

    :meth:`ask` sends a request, :meth:`answer` waits for its answer; the parent works meanwhile.
    """

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe(duplex=True)
        self._process = ctx.Process(target=_serve, args=(fn, child, self._conn), daemon=True)
        self._process.start()
        child.close()

    def ask(self, request: Any) -> bool:
        """Send a request (``False``: the child is gone)."""
        try:
            self._conn.send(request)
        except (OSError, ValueError):
            return False
        return True

    def answer(self, timeout_s: float) -> tuple[bool, Any]:
        """``(True, fn(request))`` for the last request, or ``(False, None)`` where none came within ``timeout_s``
        seconds or the child is gone (it is then stopped: ask nothing more).

        Raises
        ------
        RuntimeError
            ``fn`` raised in the child (the message holds its traceback; the child is stopped).
        """
        try:
            if self._conn.poll(_seconds(timeout_s)):
                kind, payload = self._conn.recv()
            else:
                self.stop()
                return False, None
        except (EOFError, OSError):
            self.stop()
            return False, None
        if kind == "error":
            self.stop()
            raise RuntimeError(f"the computation beside the solve failed:\n{payload}")
        return True, payload

    def stop(self) -> None:
        """End the child and release the pipe (a second call is harmless)."""
        _end(self._process)
        self._conn.close()
