"""Galvatron's problem in ``gap`` sweeps: its even-split search (re-implemented) and the best uniform plan against the
exact search.

An instance is a small setting file (``format: milp-partition-galvatron/1``) naming a Galvatron model profile folder,
a hardware folder (paths relative to the file) and the setting::

    {"format": "milp-partition-galvatron/1", "model": "models/llama2-7b", "hardware": "hardware",
     "devices": 8, "memory": "36GiB", "global_batch": 16}

Grid axes ``devices`` and ``memory`` override the file's.  Every baseline's plan is scored by
:func:`verify_galvatron` (the sound 1F1B time in seconds); the exact row carries the chain's verified value, bound
and status.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from milp_partition.errors import InputError
from milp_partition.galvatron.problem import GalvatronPlan, GalvatronProblem
from milp_partition.galvatron.solve import GalvatronSolveSettings, solve_galvatron
from milp_partition.heuristics.galvatron_even import DeadlineReached, best_uniform, galvatron_even_split
from milp_partition.io.galvatron import read_galvatron
from milp_partition.io.json_text import read_setting_file, recognize_setting_file
from milp_partition.sweep.jobs import EXACT, GapJob, exact_row, heuristic_row
from milp_partition.units import parse_bytes
from milp_partition.verifiers.galvatron import verify_galvatron

FORMAT = "milp-partition-galvatron/1"
#: The fields of a setting file (any other is refused, naming the closest).
KEYS = ("format", "model", "hardware", "devices", "memory", "global_batch")
OBJECTIVE = "iteration time"
AXES: Mapping[str, tuple[str, ...] | None] = {"devices": None, "memory": None}


def _uniform(problem: GalvatronProblem, deadline: float) -> GalvatronPlan | None:
    plan = best_uniform(problem, deadline)[0]
    if time.monotonic() > deadline:
        raise DeadlineReached("the uniform search reached its time limit before trying every setting")
    return plan


#: Heuristic name -> ``(problem, deadline as time.monotonic()) -> plan or None``; past the deadline each raises
#: :class:`DeadlineReached` (a failed row), as a partial search is not the baseline's answer.
HEURISTIC_FUNCTIONS: Mapping[str, Callable[[GalvatronProblem, float], GalvatronPlan | None]] = {
    "galvatron-even-split": lambda p, d: galvatron_even_split(p, d)[0],
    "uniform-even": _uniform,
}
HEURISTICS: tuple[str, ...] = tuple(HEURISTIC_FUNCTIONS)


def _setting(path: Path) -> dict[str, Any]:
    return read_setting_file(path, FORMAT, "Galvatron", KEYS)


def recognize(path: Path) -> str | None:
    """``None`` for a Galvatron setting file, else why it is not one."""
    return recognize_setting_file(path, FORMAT, "Galvatron", KEYS)


def load(path: str | Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> GalvatronProblem:
    """The setting of the file with the point's devices and memory over the file's."""
    data = _setting(Path(path))
    p = dict(point)
    base = Path(path).parent
    missing = [k for k in ("model", "hardware", "devices", "memory", "global_batch") if k not in data and k not in p]
    if missing:
        raise InputError("missing " + ", ".join(missing), source=str(path))
    mem = parse_bytes(str(p.get("memory", data.get("memory"))), "memory")
    if mem % 1048576:
        raise InputError("memory must be a whole number of MiB", source=str(path))
    try:
        devices = int(str(p.get("devices", data.get("devices"))))
    except ValueError:
        raise InputError("devices must be an integer", source=str(path)) from None
    batch = data["global_batch"]
    if isinstance(batch, bool) or not isinstance(batch, int):
        raise InputError(f"global_batch must be an integer, got {batch!r}", source=str(path))
    return read_galvatron(
        base / str(data["model"]), base / str(data["hardware"]), devices=devices, memory_mb=mem // 1048576, global_batch=batch
    )


def check(path: Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> None:
    load(path, point, options)


def run(job: GapJob) -> dict[str, str]:
    """One baseline or the exact search on one setting at one point: a CSV row."""
    problem = load(job.path, job.point, dict(job.options))
    base = {"size": str(problem.layers), "unit": "s"}
    if job.method == EXACT:
        return exact_row(job, solve_galvatron(problem, GalvatronSolveSettings(time_limit_s=job.time_limit_s)), base)
    baseline = HEURISTIC_FUNCTIONS.get(job.method)
    if baseline is None:
        raise InputError(f"unknown galvatron heuristic {job.method!r}; known: {', '.join(HEURISTICS)}")

    deadline = time.monotonic() + job.time_limit_s

    def heuristic() -> tuple[GalvatronPlan | None, str]:
        plan = baseline(problem, deadline)
        return plan, "" if plan is not None else "no plan fits"

    def verify(plan: GalvatronPlan) -> tuple[bool, float, list[str]]:
        rep = verify_galvatron(problem, plan)
        return rep.feasible, rep.objective, list(rep.violations)

    return heuristic_row(job, base, heuristic, verify)
