"""Steps shared by the solve chains of every problem: progress text, the back-end call, the check of its answer."""

from __future__ import annotations

import math
import sys

from milp_partition.backends import Model, SolveOutput, SolveParams, get_backend
from milp_partition.result import Result

#: Relative tolerance between the back-end's objective and the verifier's before a mismatch is an error.
OBJECTIVE_MATCH_REL_TOL = 1e-6


def say(progress_interval_s: float | None, text: str) -> None:
    """Print a line on stderr unless progress output is off (``None``)."""
    if progress_interval_s is not None:
        print(text, file=sys.stderr, flush=True)


def run_backend(result: Result, solver: str, model: Model, params: SolveParams) -> SolveOutput:
    """Solve ``model`` with back-end ``solver``; record its time, notes, log and first incumbent in ``result``."""
    out = get_backend(solver).solve(model, params)
    result.solver_seconds = out.wall_seconds
    result.solver_notes.update(out.notes)
    result.solver_log = out.log
    if result.warm_start:
        result.warm_start["first_incumbent"] = out.first_incumbent
    return out


def answer_error(feasible: bool, violations: list[str], verified: float, out: SolveOutput) -> str | None:
    """Why the back-end's decoded answer cannot be reported (the verifier rejects it, or the objectives differ)."""
    if not feasible:
        return "the verifier rejected the solver's solution: " + "; ".join(violations[:5])
    slack = 1e-9 + float(out.notes.get("rounding_error", 0.0))  # type: ignore[arg-type]
    if not math.isclose(verified, out.objective, rel_tol=OBJECTIVE_MATCH_REL_TOL, abs_tol=slack):
        return f"the verifier's objective {verified!r} differs from the solver's {out.objective!r}: a bug"
    return None
