"""Steps shared by the solve chains of every problem: progress text, the back-end call, the check of its answer."""

from __future__ import annotations

import math
import sys
import time
from typing import Protocol

from milp_partition.backends import Model, SolveOutput, SolveParams, SolveStatus, get_backend
from milp_partition.backends.cbc import stop_cbc_children
from milp_partition.result import Result

#: Relative tolerance between the back-end's objective and the verifier's before a mismatch is an error.
OBJECTIVE_MATCH_REL_TOL = 1e-6


def say(progress_interval_s: float | None, text: str) -> None:
    """Print a line on stderr unless progress output is off (``None``)."""
    if progress_interval_s is not None:
        print(text, file=sys.stderr, flush=True)


class BackendSettings(Protocol):
    """The fields of a problem's solve settings that the back-end call reads."""

    solver: str
    time_limit_s: float
    threads: int
    seed: int
    warm_start: bool
    progress_interval_s: float | None


def run_backend(result: Result, settings: BackendSettings, model: Model) -> SolveOutput:
    """Solve ``model`` with ``settings.solver``; record its time, notes, log and first incumbent in ``result``."""
    say(
        settings.progress_interval_s,
        f"[{settings.solver}] model: {len(model.variables)} variables, {len(model.constraints)} constraints; "
        f"time limit {settings.time_limit_s:g}s, {settings.threads} threads",
    )
    params = SolveParams(
        time_limit_s=settings.time_limit_s,
        threads=settings.threads,
        seed=settings.seed,
        progress_interval_s=settings.progress_interval_s,
        use_hint=settings.warm_start,
        cpsat_parameters=tuple(getattr(settings, "cpsat_parameters", ())),
    )
    backend = get_backend(settings.solver)
    start = time.monotonic()
    try:
        out = backend.solve(model, params)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the chain goes on with the heuristics' verified best, if any
        stop_cbc_children()
        out = SolveOutput(SolveStatus.UNKNOWN, wall_seconds=time.monotonic() - start, log="interrupted")
        result.solver_notes["interrupted"] = True
        result.message = "interrupted; the best verified solution found before the interrupt"
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
