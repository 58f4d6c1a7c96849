"""The settings every problem's search takes, as one typed value: :class:`CommonSettings`.

Every problem's own settings dataclass (``SolveSettings``, ``StrategySolveSettings``,
``PlacementSolveSettings``, ``JointSolveSettings``, ``GalvatronSolveSettings``) derives from
:class:`CommonSettings`, so the common fields are declared here once, with one meaning, and
``settings.common`` is the one value the chain (:func:`milp_partition.chain.chain_settings`)
reads.  The command line builds it once, from the flags, in
:meth:`milp_partition.registry.ProblemEntry.common_settings`, which refuses a flag the problem's
search does not use.

Why a base class rather than a ``common`` field: every caller that writes
``SolveSettings(time_limit_s=30, threads=1)`` keeps working, and the fields still have one
declaration, one type and one reader.

This module sits at the bottom layer with :mod:`milp_partition.budget`: it imports nothing
else of the project.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from milp_partition.backends.registry import solver_choices
from milp_partition.budget import Budget

#: The back-ends a problem's ``solver`` may name (``"none"``: heuristics, bounds and exact DPs only), from the
#: back-end registry (:mod:`milp_partition.backends.registry`).
SOLVERS = tuple(solver_choices())


@dataclass(frozen=True, kw_only=True)
class CommonSettings:
    """What every problem's search takes: back-end, time, threads, seed, warm start, progress.

    Attributes
    ----------
    solver
        ``"cpsat"``, ``"cbc"`` or ``"none"`` (heuristics, bounds and exact DPs only).
    time_limit_s
        One budget for the whole solve, in seconds: :func:`milp_partition.chain.run_chain` turns it into the run's
        :class:`~milp_partition.budget.Budget` when it starts (unless ``budget`` is given).
    threads
        Threads of the back-end (and, where a problem says so, of its own parallel phases).
    seed
        The back-end's random seed (CP-SAT's ``random_seed``, CBC's ``randomSeed``/``randomCbcSeed``).
    warm_start
        Hint the best verified solution to the back-end and let a formulation cut off worse values.
    progress_interval_s
        Seconds between progress lines on stderr (``None``: silent).
    budget
        A deadline shared with the caller: when given, the chain runs under it instead of starting
        ``time_limit_s`` anew (a nested solve that must end with the solve that runs it).
    """

    solver: str = "cpsat"
    time_limit_s: float = 60.0
    threads: int = 2
    seed: int = 0
    warm_start: bool = True
    progress_interval_s: float | None = None
    budget: Budget | None = None

    def __post_init__(self) -> None:
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got {self.solver!r}")
        if not (isinstance(self.time_limit_s, (int, float)) and self.time_limit_s >= 0):  # (a NaN fails too)
            raise ValueError(f"time_limit_s must be 0 or more seconds, got {self.time_limit_s!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads must be a whole number of at least 1, got {self.threads!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a whole number of at least 0, got {self.seed!r}")

    @property
    def common(self) -> CommonSettings:
        """These settings' common part, as a :class:`CommonSettings` of its own (what the chain reads)."""
        return CommonSettings(**{f.name: getattr(self, f.name) for f in fields(CommonSettings)})

    def start(self) -> Budget:
        """The run's budget: ``budget`` when given, else ``time_limit_s`` from now."""
        return self.budget if self.budget is not None else Budget.starting_now(self.time_limit_s)


@dataclass(frozen=True, kw_only=True)
class SearchOnlySettings(CommonSettings):
    """The common settings of a problem whose own exact search proves and no back-end runs (Galvatron's, hetero):
    ``solver`` stays ``"none"``.

    Attributes
    ----------
    heuristics
        Run the problem's heuristics first (their best is the exact search's first incumbent).
    """

    solver: str = "none"
    heuristics: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.solver != "none":
            raise ValueError(
                f"this problem runs no back-end (its exact search proves): solver must be 'none', got {self.solver!r}"
            )


def common_fields(common: CommonSettings) -> dict[str, object]:
    """``common``'s fields as keyword arguments of a problem's settings (``Settings(**common_fields(c), ...)``)."""
    return {f.name: getattr(common, f.name) for f in fields(CommonSettings)}
