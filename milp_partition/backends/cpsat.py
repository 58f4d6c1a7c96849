"""OR-Tools CP-SAT back-end.

The model is scaled to integers by :func:`milp_partition.backends.scaling.scale_model`;
CP-SAT statuses are translated to :class:`SolveStatus` in :func:`translate_status`
and nowhere else.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from milp_partition.backends.base import ProgressPrinter, SolveOutput, SolveParams, SolveStatus, ticking
from milp_partition.backends.model import Model
from milp_partition.backends.options import CpSatOptions, own_options
from milp_partition.backends.scaling import ScaledModel, scale_model
from milp_partition.budget import Budget
from milp_partition.errors import ModelError, SolverUnavailableError

#: CP-SAT parameters set on every solve, before the caller's, because without them CP-SAT proves false optima.
#:
#: ``presolve_inclusion_work_limit = 0`` turns off the presolve step that detects
#: constraints included in others: on ``tests/data/cpsat_inclusion_false_optimum.pbtxt``
#: (the pipeline model of a 5-node random instance, ``tests/test_proof_soundness.py``
#: seed 10162) OR-Tools 9.15 with it reports OPTIMAL 42129200 although 42105098 is feasible
#: (adding ``T <= 42105098`` gives a solution); with it off, or presolve off, it proves 42105098.
#: The same bug and workaround are reported upstream: https://github.com/google/or-tools/issues/5293
SOUNDNESS_PARAMETERS: tuple[tuple[str, object], ...] = (("presolve_inclusion_work_limit", 0),)


def _solve_interruptibly(solver: Any, cp: Any, callback: Any) -> tuple[int, bool]:
    """Run ``solver.solve`` in a worker thread so that the main thread keeps handling signals.

    A KeyboardInterrupt (Ctrl-C, or SIGTERM as the CLI maps it) while it runs stops the search
    (``StopSearch``) and waits for it: the best solution found so far is kept, and the second value
    says it was interrupted.  Without this, a SIGTERM would wait for the whole time limit.
    """
    box: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            box.append(solver.solve(cp, callback))
        except BaseException as exc:  # pragma: no cover - re-raised in the caller
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=work, name="cpsat-solve", daemon=True).start()
    interrupted = False
    while not done.is_set():  # an Event, not Thread.join: an interrupted join can leave the thread looking finished
        try:
            done.wait(0.1)
        except KeyboardInterrupt:
            interrupted = True
            solver.stop_search()
    if errors:
        raise errors[0]
    return box[0], interrupted


def translate_status(code: int, has_solution: bool) -> SolveStatus:
    from ortools.sat.python import cp_model

    if code == cp_model.OPTIMAL:
        return SolveStatus.OPTIMAL
    if code == cp_model.FEASIBLE:
        return SolveStatus.FEASIBLE
    if code == cp_model.INFEASIBLE:
        return SolveStatus.INFEASIBLE
    if code == cp_model.MODEL_INVALID:
        return SolveStatus.ERROR
    return SolveStatus.FEASIBLE if has_solution else SolveStatus.UNKNOWN


class CpSatBackend:
    """Solve a :class:`Model` with OR-Tools CP-SAT."""

    name = "cpsat"

    def solve(self, model: Model, params: SolveParams) -> SolveOutput:
        try:
            from ortools.sat.python import cp_model
        except ImportError as exc:  # pragma: no cover - ortools is a core dependency
            cause: BaseException | None = exc
            while cause is not None:  # Ctrl-C during the (slow) import can surface as an ImportError
                if isinstance(cause, KeyboardInterrupt):
                    raise KeyboardInterrupt from None
                cause = cause.__cause__ or cause.__context__
            raise SolverUnavailableError(f"OR-Tools is not installed: {exc}; pip install ortools") from exc

        options = own_options(params.options, "cpsat", CpSatOptions)
        scaled = scale_model(model, options.max_scaled_magnitude, params.budget)
        cp = cp_model.CpModel()
        cp_vars = _build(cp, model, scaled, params.budget)
        hinted = 0
        if params.use_hint and model.hint:
            for i, value in model.hint.items():
                v = model.variables[i]
                cp.add_hint(cp_vars[i], _to_int(value, v.kind.value == "continuous", scaled))
                hinted += 1

        solver = cp_model.CpSolver()
        if params.budget is not None and params.budget.expired():
            raise TimeoutError("the time limit ran out while the model was translated for the solver")
        solver.parameters.max_time_in_seconds = float(params.solver_seconds())
        solver.parameters.num_workers = int(params.threads)
        solver.parameters.random_seed = int(params.seed)
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False
        solver.parameters.catch_sigint_signal = False  # interrupts reach Python (see _solve_interruptibly)
        for key, setting in (*SOUNDNESS_PARAMETERS, *options.parameters):
            setattr(solver.parameters, key, setting)
        log_lines: list[str] = []
        solver.log_callback = log_lines.append

        s = scaled.scale
        first: list[float] = []
        progress = ProgressPrinter("cpsat", params.progress_interval_s)

        class _Callback(cp_model.CpSolverSolutionCallback):
            def on_solution_callback(self) -> None:
                obj = self.objective_value / s
                if not first:
                    first.append(obj)
                progress.update(incumbent=obj, bound=self.best_objective_bound / s - scaled.max_error)

        solver.best_bound_callback = lambda b: progress.update(bound=b / s - scaled.max_error)
        start = time.monotonic()
        with progress:
            code, interrupted = _solve_interruptibly(solver, cp, _Callback())
        wall = time.monotonic() - start

        has_solution = code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        status = translate_status(code, has_solution)
        if status is SolveStatus.OPTIMAL and not scaled.bound_valid:
            status = SolveStatus.FEASIBLE  # optimal for a tighter (rounded) integer model only
        notes: dict[str, object] = {
            "scale": s,
            "scaling_exact": scaled.exact and scaled.bound_valid,
            "rounding_error": scaled.max_error,
            "hinted_variables": hinted,
            "cpsat_status": solver.status_name(code),
        }
        if interrupted:
            notes["interrupted"] = True  # stopped by Ctrl-C or SIGTERM: its best solution so far, no proof
        out = SolveOutput(status=status, wall_seconds=wall, log="\n".join(log_lines), notes=notes, interrupted=interrupted)
        out.first_incumbent = first[0] if first else None
        if has_solution:
            values = []
            for i, v in enumerate(model.variables):
                raw = solver.value(cp_vars[i])
                values.append(raw / s if v.kind.value == "continuous" else float(raw))
            out.values = values
            out.objective = solver.objective_value / s
        if not scaled.bound_valid:
            out.bound = -math.inf
        elif status is SolveStatus.OPTIMAL:
            out.bound = out.objective - scaled.max_error
        elif has_solution or status is SolveStatus.UNKNOWN:
            bound = solver.best_objective_bound
            out.bound = bound / s - scaled.max_error if math.isfinite(bound) else -math.inf
        return out


def _to_int(value: float, continuous: bool, scaled: ScaledModel) -> int:
    return round(value * scaled.scale) if continuous else round(value)


def _build(cp: Any, model: Model, scaled: ScaledModel, budget: Budget | None = None) -> list[Any]:
    from ortools.sat.python import cp_model

    assert isinstance(cp, cp_model.CpModel)
    cp_vars: list[Any] = []
    for v, (lb, ub) in zip(model.variables, scaled.bounds):
        if v.kind.value == "binary":
            cp_vars.append(cp.new_bool_var(v.name))
        else:
            cp_vars.append(cp.new_int_var(lb, ub, v.name))
    for row in ticking(scaled.rows, budget):
        if not row.terms:
            if not _trivially_true(row.sense, row.rhs):
                cp.add_bool_or([])  # an empty row that cannot hold: infeasible
            continue
        idx = list(row.terms)
        expr = cp_model.LinearExpr.weighted_sum([cp_vars[i] for i in idx], [row.terms[i] for i in idx])
        if row.sense == "<=":
            cp.add(expr <= row.rhs)
        elif row.sense == ">=":
            cp.add(expr >= row.rhs)
        elif row.sense == "==":
            cp.add(expr == row.rhs)
        else:  # pragma: no cover
            raise ModelError(f"unknown sense {row.sense!r}")
    _build_scheduling(cp, cp_vars, scaled)
    idx = list(scaled.objective)
    cp.minimize(cp_model.LinearExpr.weighted_sum([cp_vars[i] for i in idx], [scaled.objective[i] for i in idx]))
    return cp_vars


def _build_scheduling(cp: Any, cp_vars: list[Any], scaled: ScaledModel) -> None:
    """Intervals, no-overlap and cumulative constraints (CP-SAT's native scheduling)."""
    from ortools.sat.python import cp_model

    assert isinstance(cp, cp_model.CpModel)
    ivs = []
    for iv in scaled.intervals:
        start = cp_vars[iv.start]
        if iv.end is not None:
            end = cp_vars[iv.end]
            size = cp.new_int_var(0, max(0, scaled.bounds[iv.end][1] - scaled.bounds[iv.start][0]), f"{iv.name}_size")
            if iv.presence is None:
                ivs.append(cp.new_interval_var(start, size, end, iv.name))
            else:
                ivs.append(cp.new_optional_interval_var(start, size, end, cp_vars[iv.presence], iv.name))
        elif iv.presence is None:
            ivs.append(cp.new_fixed_size_interval_var(start, iv.size, iv.name))
        else:
            ivs.append(cp.new_optional_fixed_size_interval_var(start, iv.size, cp_vars[iv.presence], iv.name))
    for no in scaled.no_overlaps:
        cp.add_no_overlap([ivs[k] for k in no])
    for intervals, demands, capacity, _name in scaled.cumulatives:
        cp.add_cumulative([ivs[k] for k in intervals], list(demands), capacity)


def _trivially_true(sense: str, rhs: int) -> bool:
    return (sense == "<=" and rhs >= 0) or (sense == ">=" and rhs <= 0) or (sense == "==" and rhs == 0)
