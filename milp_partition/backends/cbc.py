"""COIN-OR CBC back-end through PuLP.

PuLP 3.x bundles CBC (``PULP_CBC_CMD``); where that command is missing (PuLP 4
installs CBC separately) ``COIN_CMD`` with a ``cbc`` on the PATH is used.  PuLP
and CBC statuses are translated to :class:`SolveStatus` in
:func:`_translate_status` and nowhere else.  CBC runs as a child process; its log
goes to a file that a thread reads for progress lines and, at the end, for the
best bound.  The model reaches CBC scaled by powers of two, under explicit tolerances,
and CBC's proof is checked against its own log
(:mod:`milp_partition.backends.cbc_scaling`).
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

from milp_partition.backends.base import ProgressPrinter, SolveOutput, SolveParams, SolveStatus, ticking
from milp_partition.backends.cbc_scaling import (
    CbcScaledModel,
    CbcTolerances,
    doubtful_proof,
    optimal_bound_slack,
    scale_for_cbc,
    stopping_slack,
)
from milp_partition.backends.lifetime import die_with_parent
from milp_partition.backends.model import Model, VarKind
from milp_partition.backends.options import CbcOptions, own_options
from milp_partition.errors import ModelError, SolverUnavailableError

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_INCUMBENT = [re.compile(r"Integer solution of " + _NUMBER), re.compile(_NUMBER + r" best solution")]
_BOUND = [re.compile(r"best possible " + _NUMBER), re.compile(r"Continuous objective value is " + _NUMBER)]
_FINAL_BOUND = re.compile(r"^Lower bound:\s+" + _NUMBER, re.M)
_MIPSTART = re.compile(r"(?:MIPStart|mipstart)[^\n]*", re.I)


def _translate_status(status: int, sol_status: int, has_values: bool) -> SolveStatus:
    """Map PuLP's ``LpProblem.status`` and ``sol_status`` codes onto :class:`SolveStatus`."""
    import pulp

    if sol_status == pulp.LpSolutionOptimal and status == pulp.LpStatusOptimal:
        return SolveStatus.OPTIMAL
    if sol_status == pulp.LpSolutionIntegerFeasible and has_values:
        return SolveStatus.FEASIBLE
    if status == pulp.LpStatusInfeasible or sol_status == pulp.LpSolutionInfeasible:
        return SolveStatus.INFEASIBLE
    if status == pulp.LpStatusUnbounded or sol_status == pulp.LpSolutionUnbounded:
        return SolveStatus.ERROR
    return SolveStatus.UNKNOWN


def _command(params: SolveParams, log_path: str, warm: bool, tolerances: CbcTolerances) -> Any:
    import pulp

    kwargs = dict(
        msg=False,
        timeLimit=float(params.time_limit_s),
        # one thread: CBC's serial code (no -threads). "-threads 1" runs its threaded code with one worker, which on a
        # loaded machine now and then waits 10 s on a trivial model (CBC 2.10.3: 4 of 2,700 tiny placement solves
        # with three processes on two cores took 10.0 s by CBC's own clock; none of 2,700 without the option)
        threads=int(params.threads) if params.threads > 1 else None,
        warmStart=warm,
        logPath=log_path,
        gapRel=tolerances.ratio_gap,
        gapAbs=tolerances.allowable_gap,
        options=[f"randomCbcSeed {int(params.seed) + 1}", *tolerances.options()],
    )
    for name in ("PULP_CBC_CMD", "COIN_CMD"):
        cls = getattr(pulp, name, None)
        if cls is None:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # PuLP 3.3 warns that PULP_CBC_CMD goes in 4.0
                cmd = cls(**kwargs)
        except Exception:
            continue
        if cmd.available():
            return cmd
    raise SolverUnavailableError(
        "CBC is not available: PuLP found neither its bundled CBC nor a 'cbc' on the PATH; "
        "install PuLP 3.x (bundles CBC) or coinor-cbc"
    )


class CbcBackend:
    """Solve a :class:`Model` with CBC through PuLP.

    The model is scaled by :func:`~milp_partition.backends.cbc_scaling.scale_for_cbc` and
    solved under ``tolerances``; a run whose proof is doubtful
    (:func:`~milp_partition.backends.cbc_scaling.doubtful_proof`) is reported feasible,
    without CBC's bound, with the reason in ``notes["proof_doubtful"]``.
    """

    name = "cbc"

    def __init__(self, tolerances: CbcTolerances | None = None) -> None:
        self.tolerances = tolerances or CbcTolerances()

    def solve(self, model: Model, params: SolveParams) -> SolveOutput:
        try:
            import pulp  # noqa: F401
        except ImportError as exc:  # pragma: no cover - pulp is a core dependency
            raise SolverUnavailableError(f"PuLP is not installed: {exc}; pip install pulp") from exc

        own_options(params.options, "cbc", CbcOptions)  # another back-end's options are refused before any work
        _cbc_dies_with_us()
        if model.has_scheduling:
            raise ModelError(
                "CBC cannot take intervals, no-overlap or cumulative constraints; "
                "build the formulation's linear (disjunctive) variant for CBC"
            )
        start = time.monotonic()
        scaled = scale_for_cbc(model, params.budget)
        tolerances = self.tolerances.for_model(scaled)
        prob, xs, warm = _pulp_problem(model, params, scaled)
        if params.budget is not None:  # the translation took its share of the budget; CBC gets what is left
            # PuLP then writes the model to an MPS file, in about as long again, and no time limit reaches that
            # write (a 780,000-variable model: 132 s of a 30 s limit): with less left than that, CBC is not started
            if params.budget.left() < time.monotonic() - start:
                raise TimeoutError("the time limit ran out while the model was translated for the solver")
            params = replace(params, time_limit_s=params.solver_seconds())
        ran = _run_cbc(prob, params, warm, tolerances, scaled)
        if isinstance(ran, SolveOutput):
            return ran
        wall, log, stopped = ran
        return _read_answer(model, prob, xs, scaled, tolerances, wall, log, stopped)


def _pulp_problem(model: Model, params: SolveParams, scaled: CbcScaledModel) -> tuple[Any, list[Any], bool]:
    """The scaled model as a PuLP problem: the problem, its variables (by index) and whether a hint was set."""
    import pulp

    prob = pulp.LpProblem(_safe_name(model.name), pulp.LpMinimize)
    cats = {VarKind.BINARY: pulp.LpBinary, VarKind.INTEGER: pulp.LpInteger, VarKind.CONTINUOUS: pulp.LpContinuous}
    bounds = scaled.bounds
    if hasattr(prob, "add_variable"):  # PuLP >= 3.3; constructing LpVariable directly is deprecated there
        xs = [prob.add_variable(f"x{v.index}", *bounds[v.index], cat=cats[v.kind]) for v in model.variables]
    else:  # pragma: no cover - older PuLP
        xs = [
            pulp.LpVariable(f"x{v.index}", lowBound=bounds[v.index][0], upBound=bounds[v.index][1], cat=cats[v.kind])
            for v in model.variables
        ]
    for k, c in enumerate(ticking(scaled.rows, params.budget)):
        expr = pulp.LpAffineExpression([(xs[i], a) for i, a in c.terms.items()])
        if c.sense == "<=":
            prob += expr <= c.rhs, f"c{k}"
        elif c.sense == ">=":
            prob += expr >= c.rhs, f"c{k}"
        else:
            prob += expr == c.rhs, f"c{k}"
    prob.setObjective(pulp.LpAffineExpression([(xs[i], a) for i, a in scaled.objective.items()]))
    warm = bool(params.use_hint and model.hint)
    if warm:
        for i, value in model.hint.items():
            # a hint is only a hint: clamped, as PuLP rejects a value outside the bounds by float noise
            # (a makespan U as T's upper bound)
            xs[i].setInitialValue(scaled.to_cbc_value(i, value))
    return prob, xs, warm


def _run_cbc(
    prob: Any, params: SolveParams, warm: bool, tolerances: CbcTolerances, scaled: CbcScaledModel
) -> SolveOutput | tuple[float, str, list[str]]:
    """Run CBC on ``prob`` with the log watcher and the overrun watchdog.

    Returns ``(wall seconds, log, watchdog messages)``, or the output of a run that failed or was killed.
    """
    import pulp

    with tempfile.TemporaryDirectory(prefix="milp_partition_cbc_") as tmp:
        log_path = os.path.join(tmp, "cbc.log")
        Path(log_path).touch()
        cmd = _command(params, log_path, warm, tolerances)
        cmd.tmpDir = tmp  # PuLP's .mps/.mst/.sol files go with the folder, also when an interrupt cuts the solve short
        progress = ProgressPrinter("cbc", params.progress_interval_s)
        stop = threading.Event()
        watcher = threading.Thread(target=_watch_log, args=(log_path, progress, stop, scaled), daemon=True)
        stopped: list[str] = []
        grace_s = own_options(params.options, "cbc", CbcOptions).overrun_grace_s
        deadline = params.time_limit_s + grace_s
        watchdog = threading.Thread(target=_watchdog, args=(deadline, grace_s, stop, stopped), daemon=True)
        start = time.monotonic()
        with progress:
            watcher.start()
            watchdog.start()
            try:
                prob.solve(cmd)
            except pulp.PulpSolverError as exc:
                stop.set()
                if stopped:  # killed past its time limit: no answer, not a failure
                    return SolveOutput(SolveStatus.UNKNOWN, wall_seconds=time.monotonic() - start, log=f"{exc}; {stopped[-1]}")
                return SolveOutput(SolveStatus.ERROR, wall_seconds=time.monotonic() - start, log=str(exc))
            finally:
                stop.set()
                watcher.join(timeout=2.0)
                watchdog.join(timeout=2.0)
        wall = time.monotonic() - start
        log = Path(log_path).read_text(errors="replace")
        if stopped:
            log += f"\n[milp_partition] {stopped[-1]}\n"
    return wall, log, stopped


def _read_answer(
    model: Model,
    prob: Any,
    xs: list[Any],
    scaled: CbcScaledModel,
    tolerances: CbcTolerances,
    wall: float,
    log: str,
    stopped: list[str],
) -> SolveOutput:
    """CBC's status, values (in model units), objective and bound, from PuLP and the log."""
    import pulp

    values = [x.varValue for x in xs]
    has_values = all(v is not None for v in values)
    status = _translate_status(prob.status, prob.sol_status, has_values)
    out = SolveOutput(status=status, wall_seconds=wall, log=log)
    out.notes = {"pulp_status": pulp.LpStatus.get(prob.status, str(prob.status)), "pulp_sol_status": prob.sol_status}
    if stopped:
        out.notes["overrun"] = stopped[-1]
        if status is SolveStatus.OPTIMAL:  # an interrupted run proves nothing
            status = out.status = SolveStatus.FEASIBLE if has_values else SolveStatus.UNKNOWN
    starts = _MIPSTART.findall(log)
    if starts:
        out.notes["mipstart"] = starts[-1].strip()
    incumbents = [float(m.group(1)) for pat in _INCUMBENT for m in pat.finditer(log)]
    if incumbents:
        first = _INCUMBENT[0].search(log)
        out.first_incumbent = scaled.to_model_units(float(first.group(1)) if first else incumbents[0])
    out.notes["cbc_objective_scale"] = scaled.objective_scale
    out.notes["cbc_increment"] = tolerances.increment
    if status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        out.values = scaled.to_model_values([float(v) for v in values])  # type: ignore[arg-type]
        out.objective = model.objective_value(out.values)
    if status is SolveStatus.OPTIMAL and out.values is not None:
        # CBC proved optimality within its stopping tolerances, of values it prints to 8 significant digits
        out.bound = out.objective - optimal_bound_slack(model, out.values, scaled, tolerances)
    else:
        # CBC prunes nodes within its gaps and increment of the incumbent: its best possible is lowered by them
        out.bound = scaled.to_model_units(_final_bound(log)) - stopping_slack(scaled, tolerances)
    doubt = doubtful_proof(log, out.objective, out.bound, scaled)
    if doubt is not None:
        out.notes["proof_doubtful"] = doubt
        out.bound = -math.inf
        if status is SolveStatus.OPTIMAL:
            out.status = SolveStatus.FEASIBLE
        elif status is SolveStatus.INFEASIBLE:  # an infeasibility proof under a tolerance warning proves nothing
            out.status = SolveStatus.UNKNOWN
    return out


class _PopenDyingWithParent:
    """``subprocess`` as PuLP's CBC runner sees it: every ``Popen`` dies with the thread that started it (Linux)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(*args: Any, **kwargs: Any) -> subprocess.Popen:  # the name PuLP calls
        if "preexec_fn" not in kwargs and sys.platform.startswith("linux"):
            kwargs["preexec_fn"] = die_with_parent
        return subprocess.Popen(*args, **kwargs)


def _cbc_dies_with_us() -> None:
    """Make the CBC processes PuLP starts die with this process (a SIGKILL of it, which no handler sees, would leave
    CBC running to its own time limit)."""
    from pulp.apis import coin_api

    if not isinstance(coin_api.subprocess, _PopenDyingWithParent):
        coin_api.subprocess = _PopenDyingWithParent()  # type: ignore[assignment]


def _cbc_children() -> list[int]:
    """PIDs of this process's child processes named ``cbc`` (Linux /proc; empty elsewhere)."""
    me, found = os.getpid(), list[int]()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :].split()
        if name.startswith("cbc") and len(rest) > 1 and int(rest[1]) == me:
            found.append(int(entry))
    return found


def stop_cbc_children() -> list[int]:
    """Kill (SIGKILL) and reap this process's ``cbc`` children; return their PIDs.

    For the interrupt path: a CBC child left running would outlive the command for its full time limit.
    """
    pids = _cbc_children()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except (ChildProcessError, OSError):
            pass
    return pids


def _watchdog(deadline_s: float, grace_s: float, stop: threading.Event, stopped: list[str]) -> None:
    """Interrupt CBC (SIGINT, then SIGKILL after ``grace_s``) when it runs past ``deadline_s`` seconds."""
    start = time.monotonic()
    if stop.wait(deadline_s):
        return
    for pid in _cbc_children():
        try:
            os.kill(pid, signal.SIGINT)
        except OSError:
            pass
    stopped.append(f"CBC ran {time.monotonic() - start:.0f} s, past its time limit: interrupted")
    if stop.wait(grace_s):
        return
    for pid in _cbc_children():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    stopped.append(f"CBC did not stop {grace_s:g} s after the interrupt: killed, its incumbent is lost")


def _final_bound(log: str) -> float:
    found = _FINAL_BOUND.findall(log)
    if found:
        return float(found[-1])
    bounds = [float(m.group(1)) for m in _BOUND[0].finditer(log)]
    return max(bounds) if bounds else -math.inf


def _watch_log(path: str, progress: ProgressPrinter, stop: threading.Event, scaled: CbcScaledModel) -> None:
    with open(path, errors="replace") as fh:
        while True:
            line = fh.readline()
            if not line:
                if stop.is_set():
                    return
                stop.wait(0.2)  # wakes at once when CBC is done
                continue
            for pat in _INCUMBENT:
                m = pat.search(line)
                if m:
                    progress.update(incumbent=scaled.to_model_units(float(m.group(1))))
            m = _BOUND[0].search(line)
            if m:
                progress.update(bound=scaled.to_model_units(float(m.group(1))))


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "model"
