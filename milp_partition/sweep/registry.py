"""The interface each problem's gap module implements, and running one job.

A problem joins the sweep with one module, ``milp_partition/<problem>/gap.py``,
that satisfies :class:`GapProblem`, named by its descriptor (``gap``) in the one
registry, :data:`milp_partition.registry.PROBLEMS`.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Protocol

from milp_partition import registry
from milp_partition.errors import InputError
from milp_partition.sweep.jobs import GapJob


class GapProblem(Protocol):
    """What a problem's gap module provides.

    Attributes
    ----------
    HEURISTICS
        Heuristic names in report order (the module's :func:`run` knows them).
    AXES
        Grid axes the problem uses: name -> allowed values (``None``: any).
    OBJECTIVE
        What ``value`` means, e.g. ``"makespan"`` (for tables and charts).
    """

    HEURISTICS: tuple[str, ...]
    AXES: Mapping[str, tuple[str, ...] | None]
    OBJECTIVE: str

    def recognize(self, path: Path) -> str | None:
        """``None`` when ``path`` holds an instance of this problem, else why not (for the skip warning)."""
        ...

    def check(self, path: Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> None:
        """Read the instance at this point; :class:`InputError` when it is bad (before any run)."""
        ...

    def run(self, job: GapJob) -> dict[str, str]:
        """Run ``job`` and return its CSV row (value from the independent verifier)."""
        ...


def gap_problems() -> list[str]:
    """The problems the sweep knows (those whose descriptor names a gap module), in the registry's order."""
    return registry.names("gap")


def gap_module(problem: str) -> ModuleType:
    """The gap module of ``problem``; :class:`InputError` for an unknown name."""
    if problem not in gap_problems():
        raise InputError(f"unknown problem {problem!r}; known: {', '.join(gap_problems())}", where="gap --problem")
    return registry.problem(problem).gap_module()


def execute(job: GapJob) -> dict[str, str]:
    """Run one job in this process; an exception becomes an ``error`` row (the sweep goes on)."""
    t0 = time.perf_counter()
    try:
        return gap_module(job.problem).run(job)
    except Exception as exc:  # any failure of one run is recorded, not raised
        last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f" at {Path(last.filename).name}:{last.lineno}" if last else ""
        return job.row(status="error", seconds=f"{time.perf_counter() - t0:.4g}", message=f"{type(exc).__name__}: {exc}{where}")
