"""The declared time schedule of the joint search's phases: one value naming each phase and its share of the budget.

Below the exact DP's cap of ideals the DP proves and takes what is left; past it (and where its passes are long)
the joint steps (:class:`milp_partition.joint.solve.JointSteps`) run seven phases, each within its share of the one
:class:`~milp_partition.budget.Budget`:

========================  =========================================  ===============================================
phase                     at most                                    what it is
========================  =========================================  ===============================================
``piper_style``           2 s and a quarter of the limit             the Piper-style warm start (below the cap, only
                                                                     where the DP's passes run in numpy)
``orders_below_cap``      20 s and a twentieth of the limit          the DP along topological orders where the graph
                                                                     has 5,000 ideals or more (an upper end)
``orders``                20 s and a sixth of the limit              the same past the cap (halved between the usual
                                                                     orders and the one-device ones where the
                                                                     polisher will run beside the column bound)
``polish``                10 s and a sixth of the limit              the local search from the best plans
``segment_bound``         5 s and a twelfth of the limit             a proven LP bound, first (it takes the stage
                                                                     bound's share too where that cannot run)
``column_bound``          600 s and four fifths of what is left      the column bound (nine tenths where no stage
                                                                     bound follows it: the bounds ran beside the
                                                                     heuristics, or it cannot run; it gives up at
                                                                     four fifths of what is left less the stage
                                                                     bound's share)
``stage_bound``           10 s and a sixth of the limit              the stage bound, where the column bound proved
                                                                     no target
(the slot formulation)    the rest                                   the back-end, warm-started by the best plan
========================  =========================================  ===============================================

The Piper-style warm start is short because the exact DP needs no good start and this project's Python Piper-style
search converges slowly (the gap tool measures it on its own, with its own limit).  The orders' DP runs along
topological orders of one, two and three groups of chains past the cap (of one and two below it); its best plan
warm-starts the slot formulation.  With two threads the segment and stage bounds run beside the orders and the polisher
in a second process, for as long as those may take (at least the bounds' own two shares); where the stage bound cannot
run (k = 16 and the like) the polisher runs beside the column bound instead, for the column bound's seconds.

Each phase is a :class:`Phase` (a cap in seconds and a share of the whole limit or of what is left when it starts);
a phase with a cap of 0 does not run.  The numbers are those the joint benchmarks were measured with
(``results/joint_milp.md``, ``docs/joint.md``); a test (``tests/test_joint_schedule.py``) holds them to the old
arithmetic.

This module is plain data on top of :mod:`milp_partition.budget`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Literal

from milp_partition.budget import Budget


@dataclass(frozen=True)
class Phase:
    """A phase's time: at most ``cap_s`` seconds and at most ``share`` of the whole limit (``of="limit"``) or of
    what is left when it starts (``of="left"``).

    Attributes
    ----------
    cap_s
        Its cap in seconds (0: the phase does not run).
    share
        Its share, from 0 to 1.
    of
        What ``share`` is of: ``"limit"`` (the whole budget, so the phase's time does not depend on when it starts)
        or ``"left"`` (what is left of it then).
    """

    cap_s: float
    share: float
    of: Literal["limit", "left"] = "limit"

    def __post_init__(self) -> None:
        if not self.cap_s >= 0:  # (a NaN fails too)
            raise ValueError(f"a phase's cap must be 0 or more seconds, got {self.cap_s!r}")
        if not 0 <= self.share <= 1:
            raise ValueError(f"a phase's share must be from 0 to 1, got {self.share!r}")
        if self.of not in ("limit", "left"):
            raise ValueError(f"a phase's share is of 'limit' or 'left', got {self.of!r}")

    @property
    def runs(self) -> bool:
        """Whether the phase runs at all (a cap of more than 0)."""
        return self.cap_s > 0

    def seconds(self, budget: Budget, share: float | None = None) -> float:
        """Its seconds under ``budget`` now: ``min(cap_s, share * (limit or what is left))`` (``share``: another
        share of the same base, e.g. :attr:`JointSchedule.column_bound_last_share`)."""
        base = budget.limit_s if self.of == "limit" else budget.left()
        return min(self.cap_s, (self.share if share is None else share) * base)


@dataclass(frozen=True)
class JointSchedule:
    """Each phase of the joint search past the DP's cap and its share of the budget (see the module docstring).

    Attributes
    ----------
    piper_style, orders_below_cap, orders, polish, segment_bound, column_bound, stage_bound
        The phases, in the order they run; the slot formulation has what is left after them.
    column_bound_last_share
        The column bound's share of what is left where no stage bound follows it (the stage bound cannot run).
    """

    piper_style: Phase = field(default_factory=lambda: Phase(2.0, 1 / 4))
    orders_below_cap: Phase = field(default_factory=lambda: Phase(20.0, 1 / 20))
    orders: Phase = field(default_factory=lambda: Phase(20.0, 1 / 6))
    polish: Phase = field(default_factory=lambda: Phase(10.0, 1 / 6))
    segment_bound: Phase = field(default_factory=lambda: Phase(5.0, 1 / 12))
    column_bound: Phase = field(default_factory=lambda: Phase(600.0, 4 / 5, "left"))
    stage_bound: Phase = field(default_factory=lambda: Phase(10.0, 1 / 6))
    column_bound_last_share: float = 9 / 10

    def capped(self, **caps_s: float) -> JointSchedule:
        """The same schedule with other caps, by phase name (``capped(polish=0)`` turns the polisher off)."""
        names = {f.name for f in fields(self) if isinstance(getattr(self, f.name), Phase)}
        unknown = sorted(set(caps_s) - names)
        if unknown:
            raise ValueError(f"no phase {', '.join(unknown)}; the phases are {', '.join(sorted(names))}")
        return replace(self, **{name: replace(getattr(self, name), cap_s=cap) for name, cap in caps_s.items()})

    def bounds_seconds(self, budget: Budget) -> float:
        """The segment and stage bounds' seconds together (what the segment bound takes where the stage bound
        cannot run, and what runs beside the heuristics at least)."""
        return self.segment_bound.seconds(budget) + self.stage_bound.seconds(budget)

    def as_dict(self) -> dict[str, object]:
        """Each phase's cap, share and base, for the result's ``settings``."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = {"cap_s": value.cap_s, "share": value.share, "of": value.of} if isinstance(value, Phase) else value
        return out
