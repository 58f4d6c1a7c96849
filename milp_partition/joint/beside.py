"""A computation in a second process, beside the main one: where a solve may use two threads, a bound runs there.

The process is forked (POSIX), so the child has the caller's data and nothing is pickled but the answer; where
fork is not available (:func:`available` is false) the caller runs the function itself.  A child that raises
hands the parent its traceback, and :meth:`Beside.result` raises it there (a bug stays visible); one that is
stopped, interrupted or killed gives no answer (``None``).
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection


def available() -> bool:
    """Whether :class:`Beside` can run here (the fork start method exists)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _child(fn: Callable[[], float], send: Connection) -> None:
    try:
        value = float(fn())
    except KeyboardInterrupt:  # the parent was interrupted too: it reports what it has
        return
    except BaseException:  # noqa: BLE001 - handed to the parent, which raises it
        send.send(("error", traceback.format_exc()))
    else:
        send.send(("ok", value))
    finally:
        send.close()


class Beside:
    """``fn()`` (a float) computed in a forked process from now on; :meth:`result` waits for it."""

    def __init__(self, fn: Callable[[], float]) -> None:
        ctx = multiprocessing.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=_child, args=(fn, send), daemon=True)
        self._process.start()
        send.close()  # the child holds the sending end: end of file once it exits

    def result(self, timeout_s: float) -> float | None:
        """The child's value, waiting at most ``timeout_s`` seconds (``None``: none by then); the child is stopped.

        Raises
        ------
        RuntimeError
            The function raised in the child (the message holds its traceback).
        """
        answer = None
        try:
            if self._recv.poll(max(0.0, timeout_s)):
                answer = self._recv.recv()
        except EOFError:  # the child exited without an answer
            answer = None
        finally:
            self.stop()
        if answer is None:
            return None
        kind, payload = answer
        if kind == "error":
            raise RuntimeError(f"the computation beside the solve failed:\n{payload}")
        return float(payload)

    def stop(self) -> None:
        """End the child (if it still runs) and release the pipe."""
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(5.0)
        self._recv.close()
