"""The back-end interface: solve a :class:`Model`, report a status, incumbent, bound and log.

Raw solver status codes are translated into :class:`SolveStatus` inside each
back-end module and nowhere else.
"""

from __future__ import annotations

import enum
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, TextIO, TypeVar

from milp_partition.backends.model import TICK_ROWS, Model
from milp_partition.backends.options import BackendOptions
from milp_partition.budget import Budget


class SolveStatus(enum.Enum):
    """Outcome of a solve."""

    OPTIMAL = "optimal"  #: the solver proved its incumbent optimal
    FEASIBLE = "feasible"  #: an incumbent, not proven optimal (time limit)
    INFEASIBLE = "infeasible"  #: the solver proved no solution exists
    UNKNOWN = "unknown"  #: stopped with neither a solution nor a proof
    ERROR = "error"  #: the solver failed or the model was invalid


@dataclass(frozen=True)
class SolveParams:
    """How to run a back-end.

    Attributes
    ----------
    time_limit_s
        Wall-clock limit of the solver itself.
    threads
        Worker threads.
    seed
        Random seed, for repeatable runs.
    progress_interval_s
        Print a progress line (incumbent, bound, gap, elapsed) on stderr at this
        period while solving; ``None`` disables progress output.
    use_hint
        Pass the model's hint as a warm start (CP-SAT hint, CBC MIP start).
    options
        The solving back-end's own options (:mod:`milp_partition.backends.options`: :class:`CpSatOptions`,
        :class:`CbcOptions`); ``None``: its defaults.  A back-end refuses another's options
        (:class:`~milp_partition.errors.InputError` naming both).
    budget
        The time the whole call may take, the translation of the model for the solver included
        (``None``: ``time_limit_s`` for the solver alone).  The translation reads it row by row
        and raises :class:`TimeoutError` once it is spent (a model of a million rows takes
        minutes to translate); the solver gets at most what is left of it.
    """

    time_limit_s: float = 60.0
    threads: int = 2
    seed: int = 0
    progress_interval_s: float | None = None
    use_hint: bool = True
    options: BackendOptions | None = None
    budget: Budget | None = None

    def solver_seconds(self) -> float:
        """The solver's own limit: ``time_limit_s``, at most what is left of ``budget`` (never below 0.1 s)."""
        if self.budget is None:
            return self.time_limit_s
        return max(0.1, min(self.time_limit_s, self.budget.left()))


@dataclass
class SolveOutput:
    """What a back-end returns.

    Attributes
    ----------
    status
        See :class:`SolveStatus`.
    values
        One value per model variable for the best solution, or ``None``.
    objective
        The back-end's objective of ``values`` in model units (not scaled); callers
        re-evaluate the decoded solution with the verifier and report that instead.
    bound
        A proven lower bound on the objective in model units, already made
        conservative for any rounding the back-end did; ``-inf`` when none.
    wall_seconds
        Time spent in the solver call.
    first_incumbent
        Objective of the first solution found (model units), to show a warm start was used.
    log
        The solver's own log.
    notes
        Facts about the run (scale used, rounding error, hint status).
    interrupted
        Ctrl-C or SIGTERM stopped it: ``values`` is its best solution so far, nothing is proven.
    """

    status: SolveStatus
    values: list[float] | None = None
    objective: float = math.inf
    bound: float = -math.inf
    wall_seconds: float = 0.0
    first_incumbent: float | None = None
    log: str = ""
    notes: dict[str, object] = field(default_factory=dict)
    interrupted: bool = False


class Backend(Protocol):
    """A solver back-end."""

    name: str

    def solve(self, model: Model, params: SolveParams) -> SolveOutput: ...


def relative_gap(objective: float, bound: float) -> float:
    """``(objective - bound) / |objective|``; 0 when equal, inf when either is missing."""
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return math.inf
    if objective <= bound:
        return 0.0
    if objective == 0:  # no relative gap at 0: within rounding of it is no gap, else an unknown one
        return 0.0 if bound >= -1e-12 else math.inf
    return (objective - bound) / abs(objective)


class ProgressPrinter:
    """Prints ``incumbent, bound, gap, elapsed`` on stderr every ``interval_s`` seconds.

    Back-ends call :meth:`update` from their callbacks; a daemon thread prints.
    """

    def __init__(self, label: str, interval_s: float | None, stream: TextIO | None = None) -> None:
        self.label = label
        self.interval_s = interval_s
        self.stream = stream or sys.stderr
        self.incumbent = math.inf
        self.bound = -math.inf
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def update(self, incumbent: float | None = None, bound: float | None = None) -> None:
        with self._lock:
            if incumbent is not None:
                self.incumbent = min(self.incumbent, incumbent)
            if bound is not None:
                self.bound = max(self.bound, bound)

    def line(self) -> str:
        with self._lock:
            inc, bnd = self.incumbent, self.bound
        gap = relative_gap(inc, bnd)
        elapsed = time.monotonic() - self._start
        inc_s = f"{inc:.6g}" if math.isfinite(inc) else "-"
        bnd_s = f"{bnd:.6g}" if math.isfinite(bnd) else "-"
        gap_s = f"{100 * gap:.2f}%" if math.isfinite(gap) else "-"
        return f"[{self.label}] {elapsed:7.1f}s  incumbent {inc_s}  bound {bnd_s}  gap {gap_s}"

    def __enter__(self) -> ProgressPrinter:
        if self.interval_s:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def _run(self) -> None:
        assert self.interval_s
        while not self._stop.wait(self.interval_s):
            write_line(self.stream, self.line())


def write_line(stream: TextIO, text: str) -> None:
    """Write ``text`` and its newline in one call and flush: a progress thread and the main thread both print on
    stderr, and ``print`` writes the text and the newline in two calls, between which the other thread's line could
    land (``... best verified 0.1345[hetero-bnb] no solution ...``)."""
    stream.write(text + "\n")
    stream.flush()


T = TypeVar("T")


def ticking(items: Iterable[T], budget: Budget | None) -> Iterator[T]:
    """``items``, reading ``budget`` every :data:`TICK_ROWS` of them; :class:`TimeoutError` once it is spent."""
    if budget is None:
        yield from items
        return
    for k, item in enumerate(items):
        if k % TICK_ROWS == 0 and budget.expired():
            raise TimeoutError("the time limit ran out while the model was translated for the solver")
        yield item


ProgressCallback = Callable[[float | None, float | None], None]
