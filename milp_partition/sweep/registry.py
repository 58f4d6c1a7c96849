"""Which problems ``gap`` knows, and the interface each problem's gap module implements.

A problem joins the sweep with one module, ``milp_partition/<problem>/gap.py``,
that satisfies :class:`GapProblem`, and one entry in :data:`PROBLEM_MODULES`.
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Protocol

from milp_partition.errors import InputError
from milp_partition.sweep.jobs import GapJob

#: Problem name -> gap module.
PROBLEM_MODULES: Mapping[str, str] = {
    "pipeline": "milp_partition.pipeline.gap",
    "strategy": "milp_partition.strategy.gap",
    "placement": "milp_partition.placement.gap",
    "joint": "milp_partition.joint.gap",
    "galvatron": "milp_partition.galvatron.gap",
}


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


def gap_module(problem: str) -> ModuleType:
    """The gap module of ``problem``; :class:`InputError` for an unknown name."""
    try:
        return importlib.import_module(PROBLEM_MODULES[problem])
    except KeyError:
        raise InputError(f"unknown problem {problem!r}; known: {', '.join(PROBLEM_MODULES)}", where="gap --problem") from None


def execute(job: GapJob) -> dict[str, str]:
    """Run one job in this process; an exception becomes an ``error`` row (the sweep goes on)."""
    t0 = time.perf_counter()
    try:
        return gap_module(job.problem).run(job)
    except Exception as exc:  # any failure of one run is recorded, not raised
        last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f" at {Path(last.filename).name}:{last.lineno}" if last else ""
        return job.row(status="error", seconds=f"{time.perf_counter() - t0:.4g}", message=f"{type(exc).__name__}: {exc}{where}")
