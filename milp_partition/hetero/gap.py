"""The heterogeneous problem in ``gap`` sweeps: Sailor-style even split and the best uniform plan against the exact
search.

An instance is a small setting file (``format: milp-partition-hetero/1``) naming Sailor's benchmark folder (a path
relative to the file) and one setting, by name (a name of the folder's ``reference/settings.json``) or inline, as
``--setting-file`` takes it::

    {"format": "milp-partition-hetero/1", "folder": "../../shared/benchmarks/hetero", "setting": "opt350-a8-v16"}
    {"format": "milp-partition-hetero/1", "folder": "hetero", "model": "OPT-350", "global_batch": 64,
     "gpus": {"A100-40_us-central1-a": 2, "V100-16_us-central1-a": 2}, "objective": "sound"}

No grid axis applies (a cluster of kinds has no one device count or memory).  Every baseline's plan is scored by
:func:`milp_partition.verifiers.hetero.verify_hetero` on its Sailor-format dict (iteration seconds under the setting's
objective); the exact row carries the chain's verified value, bound and status.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from milp_partition.budget import Budget
from milp_partition.errors import InputError
from milp_partition.hetero.problem import HeteroPlan, HeteroProblem, plan_to_sailor
from milp_partition.hetero.solve import HeteroSolveSettings, solve_hetero
from milp_partition.heuristics.hetero_even import best_even_plan, best_uniform_plan
from milp_partition.io.json_text import read_setting_file, recognize_setting_file
from milp_partition.io.sailor import build_problem, read_sailor
from milp_partition.sweep.jobs import EXACT, STOPPED_AT_LIMIT, GapJob, exact_row, heuristic_row
from milp_partition.verifiers.hetero import verify_hetero

FORMAT = "milp-partition-hetero/1"
#: The fields of a setting file (any other is refused, naming the closest).
KEYS = ("format", "folder", "setting", "name", "model", "global_batch", "gpus", "objective")
OBJECTIVE = "iteration time"
AXES: Mapping[str, tuple[str, ...] | None] = {}

#: Heuristic name -> ``(problem, budget) -> plan or None``: each searches a small space to the end, or stops at the
#: budget with the best plan priced so far (at least its first).
HEURISTIC_FUNCTIONS: Mapping[str, Callable[[HeteroProblem, Budget], HeteroPlan | None]] = {
    "sailor-even": lambda p, b: best_even_plan(p, budget=b)[0],
    "uniform": lambda p, b: best_uniform_plan(p, budget=b)[0],
}
HEURISTICS: tuple[str, ...] = tuple(HEURISTIC_FUNCTIONS)


def _setting(path: Path) -> dict[str, Any]:
    return read_setting_file(path, FORMAT, "hetero", KEYS)


def recognize(path: Path) -> str | None:
    """``None`` for a hetero setting file, else why it is not one."""
    return recognize_setting_file(path, FORMAT, "hetero", KEYS)


def load(path: str | Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> HeteroProblem:
    """The setting of the file on its folder's data (``point`` is empty: no grid axis applies)."""
    src = str(path)
    data = _setting(Path(path))
    folder = data.get("folder")
    if not isinstance(folder, str) or not folder:
        raise InputError("expected the path of Sailor's benchmark folder (relative to this file)", source=src, where="folder")
    root = Path(path).parent / folder
    objective = data.get("objective", "sailor")
    if objective not in ("sailor", "sound"):
        raise InputError(f"the objective is sailor or sound, got {objective!r}", source=src, where="objective")
    name = data.get("setting")
    if name is not None:
        if not isinstance(name, str):
            raise InputError(f"expected a setting name, got {name!r}", source=src, where="setting")
        inline = [k for k in ("model", "global_batch", "gpus") if k in data]
        if inline:
            raise InputError(f"give a setting name or {', '.join(inline)} inline, not both", source=src, where="setting")
        return read_sailor(root, setting=name, objective=objective)
    if not (root / "models").is_dir():
        raise InputError(f"{root} is not Sailor's benchmark folder", source=src, where="folder")
    return build_problem(root, data, source=src, objective=objective)


def check(path: Path, point: tuple[tuple[str, str], ...], options: Mapping[str, str]) -> None:
    load(path, point, options)


def run(job: GapJob) -> dict[str, str]:
    """One baseline or the exact search on one setting: a CSV row."""
    problem = load(job.path, job.point, dict(job.options))
    base = {"size": str(sum(c.count for c in problem.cluster.columns)), "unit": "s"}
    if job.method == EXACT:
        settings = HeteroSolveSettings(time_limit_s=job.time_limit_s, progress_interval_s=None)
        return exact_row(job, solve_hetero(problem, settings), base)
    baseline = HEURISTIC_FUNCTIONS.get(job.method)
    if baseline is None:
        raise InputError(f"unknown hetero heuristic {job.method!r}; known: {', '.join(HEURISTICS)}")

    def heuristic() -> tuple[HeteroPlan | None, str]:
        budget = Budget.starting_now(job.time_limit_s)
        plan = baseline(problem, budget)
        if plan is None:
            return None, "no plan fits"
        return plan, f"{STOPPED_AT_LIMIT}: the best plan priced before it" if budget.expired() else ""

    def verify(plan: HeteroPlan) -> tuple[bool, float, list[str]]:
        rep = verify_hetero(problem, plan_to_sailor(plan))
        return rep.feasible, rep.iteration_s if rep.iteration_s is not None else float("inf"), list(rep.violations)

    return heuristic_row(job, base, heuristic, verify)
