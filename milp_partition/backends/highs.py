"""HiGHS back-end through highspy (the ``highs`` extra: ``pip install 'milp-partition[highs]'``).

HiGHS solves in floating point, like CBC, so the model reaches it scaled the same way, by powers of two
(:func:`~milp_partition.backends.cbc_scaling.scale_for_cbc`: continuous columns, rows and the objective; exact,
no mantissa bit changes), under explicit tolerances (:class:`HighsTolerances`, stated in the notes).  HiGHS model
statuses are translated to :class:`SolveStatus` in :func:`translate_status` and nowhere else.

The bound: HiGHS's ``mip_dual_bound`` (for an optimal run, at most the incumbent's objective), read back in model
units and lowered by the absolute stopping gap and by ``BOUND_SLACK_REL`` of the objective's magnitude (HiGHS's
feasibility tolerances act on scaled rows, its values are doubles).  A bound above the incumbent's own objective
beyond that is a doubtful proof: the run is then reported feasible, without a bound (``notes["proof_doubtful"]``),
as the CBC back-end does.  The chain re-checks every solution with the problem's verifier either way.

A solve runs in highspy's worker thread; Ctrl-C (or SIGTERM as the CLI maps it) cancels it and its incumbent is
returned (capability ``CANCEL``).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from milp_partition.backends.base import ProgressPrinter, SolveOutput, SolveParams, SolveStatus
from milp_partition.backends.cbc_scaling import CbcScaledModel, scale_for_cbc
from milp_partition.backends.model import Model, VarKind
from milp_partition.backends.options import no_options
from milp_partition.errors import ModelError, SolverUnavailableError

#: A proven bound is lowered by this much of ``sum |c_i x_i|`` (the objective's magnitude at the incumbent).
BOUND_SLACK_REL = 1e-9


@dataclass(frozen=True)
class HighsTolerances:
    """HiGHS options set on every solve (its defaults stop at a 1e-4 relative gap: not a proof here).

    Attributes
    ----------
    mip_rel_gap, mip_abs_gap
        Relative and absolute gaps at which HiGHS stops (scaled objective units for the absolute one).
    mip_feasibility
        ``mip_feasibility_tolerance``: integrality and row violation in the MIP search.
    primal, dual
        ``primal_feasibility_tolerance`` / ``dual_feasibility_tolerance`` of its LPs (on the scaled rows).
    """

    mip_rel_gap: float = 0.0
    mip_abs_gap: float = 1e-10
    mip_feasibility: float = 1e-9
    primal: float = 1e-9
    dual: float = 1e-9

    def options(self) -> dict[str, float]:
        return {
            "mip_rel_gap": self.mip_rel_gap,
            "mip_abs_gap": self.mip_abs_gap,
            "mip_feasibility_tolerance": self.mip_feasibility,
            "primal_feasibility_tolerance": self.primal,
            "dual_feasibility_tolerance": self.dual,
        }


def _highspy() -> Any:
    try:
        import highspy
    except ImportError as exc:
        raise SolverUnavailableError(f"HiGHS is not installed: {exc}; pip install 'milp-partition[highs]'") from exc
    return highspy


def _new_highs(highspy: Any) -> Any:
    """A ``Highs`` instance without its banner: its constructor prints two lines on the C stdout (which would land in
    the CLI's report and in ``--output -``), so file descriptor 1 points at the null device meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        try:
            return highspy.Highs()
        finally:
            os.dup2(saved, 1)
    finally:
        os.close(null)
        os.close(saved)


def translate_status(model_status: Any, has_solution: bool) -> SolveStatus:
    """HiGHS's ``HighsModelStatus`` as a :class:`SolveStatus` (a limit or an interrupt: feasible with a solution)."""
    s = _highspy().HighsModelStatus
    if model_status == s.kOptimal:
        return SolveStatus.OPTIMAL if has_solution else SolveStatus.ERROR
    if model_status == s.kInfeasible:
        return SolveStatus.INFEASIBLE
    stopped = (s.kTimeLimit, s.kIterationLimit, s.kSolutionLimit, s.kInterrupt, s.kHighsInterrupt, s.kObjectiveBound)
    if model_status in (*stopped, s.kUnknown, s.kNotset):
        return SolveStatus.FEASIBLE if has_solution else SolveStatus.UNKNOWN
    return SolveStatus.ERROR  # load, model, presolve, solve or postsolve errors; unbounded (no model here is)


class HighsBackend:
    """Solve a :class:`Model` with HiGHS (module docstring)."""

    name = "highs"

    def __init__(self, tolerances: HighsTolerances | None = None) -> None:
        self.tolerances = tolerances or HighsTolerances()

    def solve(self, model: Model, params: SolveParams) -> SolveOutput:
        no_options(params.options, "highs")  # HiGHS has no options of its own: another back-end's are refused
        highspy = _highspy()
        if model.has_scheduling:
            raise ModelError(
                "HiGHS cannot take intervals, no-overlap or cumulative constraints; "
                "build the formulation's linear (disjunctive) variant for it"
            )
        scaled = scale_for_cbc(model)
        h = _new_highs(highspy)
        with tempfile.TemporaryDirectory(prefix="milp_partition_highs_") as tmp:
            log_path = os.path.join(tmp, "highs.log")
            for key, value in {
                "output_flag": True,
                "log_to_console": False,
                "log_file": log_path,
                "time_limit": float(params.time_limit_s),
                "threads": int(params.threads),
                "random_seed": int(params.seed),
                **self.tolerances.options(),
            }.items():
                h.setOptionValue(key, value)
            integral = _load(h, highspy, model, scaled)
            hinted = _hint(h, model, scaled) if params.use_hint and model.hint else 0
            h.HandleUserInterrupt = True
            progress = ProgressPrinter("highs", params.progress_interval_s)
            start = time.monotonic()
            interrupted = False
            with progress:
                thread = h.startSolve()
                done = False
                while not done:
                    try:
                        done, _ = h.wait(0.1)
                    except KeyboardInterrupt:
                        interrupted = True
                        h.cancelSolve()
                thread.join(timeout=5.0)
            wall = time.monotonic() - start
            log = Path(log_path).read_text(errors="replace") if Path(log_path).exists() else ""
        return _answer(h, highspy, model, scaled, integral, wall, log, hinted, interrupted, self.tolerances)


def _load(h: Any, highspy: Any, model: Model, scaled: CbcScaledModel) -> bool:
    """Pass the scaled model to HiGHS (columns, integrality, rows in CSR); whether any column is integral."""
    n = len(model.variables)
    inf = h.getInfinity()
    cost = np.zeros(n)
    for i, a in scaled.objective.items():
        cost[i] = a
    lower = np.array([b[0] for b in scaled.bounds], dtype=float)
    upper = np.array([b[1] for b in scaled.bounds], dtype=float)
    h.addCols(n, cost, lower, upper, 0, np.zeros(n, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))
    ints = np.array([i for i, v in enumerate(model.variables) if v.kind is not VarKind.CONTINUOUS], dtype=np.int32)
    if len(ints):
        kinds = np.full(len(ints), int(highspy.HighsVarType.kInteger), dtype=np.uint8)
        h.changeColsIntegrality(len(ints), ints, kinds)
    m = len(scaled.rows)
    if m:
        lo, hi, starts = np.empty(m), np.empty(m), np.empty(m, dtype=np.int32)
        index: list[int] = []
        value: list[float] = []
        for k, row in enumerate(scaled.rows):
            lo[k] = row.rhs if row.sense in (">=", "==") else -inf
            hi[k] = row.rhs if row.sense in ("<=", "==") else inf
            starts[k] = len(index)
            index += list(row.terms)
            value += list(row.terms.values())
        h.addRows(m, lo, hi, len(index), starts, np.array(index, dtype=np.int32), np.array(value, dtype=float))
    return bool(len(ints))


def _hint(h: Any, model: Model, scaled: CbcScaledModel) -> int:
    """Set the model's hint as HiGHS's starting solution (sparse; HiGHS completes it); the number of values set."""
    index = np.array(sorted(model.hint), dtype=np.int32)
    value = np.array([scaled.to_cbc_value(int(i), model.hint[int(i)]) for i in index], dtype=float)
    h.setSolution(len(index), index, value)
    return len(index)


def _answer(
    h: Any,
    highspy: Any,
    model: Model,
    scaled: CbcScaledModel,
    integral: bool,
    wall: float,
    log: str,
    hinted: int,
    interrupted: bool,
    tolerances: HighsTolerances,
) -> SolveOutput:
    """HiGHS's status, values (in model units), objective and proven bound."""
    info = h.getInfo()
    model_status = h.getModelStatus()
    has_solution = int(info.primal_solution_status) == 2  # kSolutionStatusFeasible
    status = translate_status(model_status, has_solution)
    if interrupted and status is SolveStatus.OPTIMAL:
        status = SolveStatus.FEASIBLE  # an interrupted run proves nothing
    out = SolveOutput(status=status, wall_seconds=wall, log=log)
    out.notes = {
        "highs_status": h.modelStatusToString(model_status),
        "highs_objective_scale": scaled.objective_scale,
        "hinted_variables": hinted,
        "highs_tolerances": tolerances.options(),
    }
    if interrupted:
        out.notes["interrupted"] = True
    if status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        out.values = scaled.to_model_values([float(v) for v in h.getSolution().col_value])
        out.objective = model.objective_value(out.values)
    magnitude = sum(abs(a * out.values[i]) for i, a in model.objective.items()) if out.values is not None else 0.0
    slack = tolerances.mip_abs_gap / scaled.objective_scale + BOUND_SLACK_REL * magnitude
    if integral:
        raw = float(info.mip_dual_bound)
        if math.isfinite(raw) and status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE, SolveStatus.UNKNOWN):
            out.bound = scaled.to_model_units(raw) - slack
        if status is SolveStatus.OPTIMAL:
            out.bound = min(out.bound, out.objective - slack) if math.isfinite(out.bound) else out.objective - slack
    elif status is SolveStatus.OPTIMAL:  # an LP: its optimum is its bound
        out.bound = out.objective - slack
    tol = 1e-6 * max(abs(out.objective), 1e-300) if math.isfinite(out.objective) else 0.0
    if math.isfinite(out.objective) and math.isfinite(out.bound) and out.bound > out.objective + tol:
        out.notes["proof_doubtful"] = f"HiGHS's bound {out.bound!r} lies above its solution's objective {out.objective!r}"
        out.bound = -math.inf
        if out.status is SolveStatus.OPTIMAL:
            out.status = SolveStatus.FEASIBLE
    return out
