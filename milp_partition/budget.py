"""One time budget for a whole solve: made once by the chain from ``time_limit_s``, handed to every phase.

A phase asks the :class:`Budget` it was given, never the clock and the limit separately:
``left()`` for a duration, ``deadline()`` for an absolute ``time.monotonic()`` value,
``share(f)`` for the budget of a phase that may use a fraction ``f`` of the whole limit
(counted from the same start), ``of_left(f)`` for one that may use a fraction of what is
left (counted from now), and ``expired()`` to stop a loop.  The clock is a parameter, so
tests can run a phase under a budget that is already spent, with no wall-clock assertion.

This module is at the bottom layer: it imports nothing of the project.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Budget:
    """``limit_s`` seconds from ``start`` (a reading of ``clock``).

    Attributes
    ----------
    limit_s
        The whole budget in seconds (``math.inf``: no limit; never negative).
    start
        When it began, as read from ``clock``.
    clock
        The monotonic clock it reads (``time.monotonic``; a fake one in tests).
    """

    limit_s: float
    start: float
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)

    @classmethod
    def starting_now(cls, limit_s: float, clock: Callable[[], float] = time.monotonic) -> Budget:
        """A budget of ``limit_s`` seconds (negative counts as 0) that starts now."""
        return cls(max(0.0, float(limit_s)), clock(), clock)

    def elapsed(self) -> float:
        """Seconds since the start."""
        return self.clock() - self.start

    def left(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.limit_s - self.elapsed())

    def deadline(self) -> float:
        """The end, as a reading of ``clock`` (``math.inf`` without a limit)."""
        return self.start + self.limit_s if math.isfinite(self.limit_s) else math.inf

    def expired(self) -> bool:
        """Whether no time is left."""
        return self.left() <= 0.0

    def share(self, fraction: float) -> Budget:
        """The budget of a phase that may use ``fraction`` of the whole limit, counted from the same start.

        It never ends after this budget (``fraction`` above 1 counts as 1).
        """
        fraction = min(1.0, max(0.0, fraction))
        return Budget(fraction * self.limit_s if fraction > 0 else 0.0, self.start, self.clock)

    def of_left(self, fraction: float) -> Budget:
        """The budget of a phase that may use ``fraction`` of what is left, from now."""
        fraction = min(1.0, max(0.0, fraction))
        return Budget(fraction * self.left() if fraction > 0 else 0.0, self.clock(), self.clock)

    def capped(self, seconds: float) -> Budget:
        """The budget of a phase that may use at most ``seconds`` from now (and never more than is left)."""
        return Budget(min(max(0.0, seconds), self.left()), self.clock(), self.clock)
