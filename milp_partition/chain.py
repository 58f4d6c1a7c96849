"""The one solve chain of every problem, and the one status policy.

Every problem (pipeline, strategy, placement, joint) is solved by :func:`run_chain`,
which runs the same steps in the same order; a problem plugs in its own steps
through the :class:`Steps` protocol (in the manner of cvxpy's split of problem,
reduction and solver interface)::

    reductions (apply, lift back)  ->  bounds  ->  heuristics  ->  refine
        ->  formulation build + hint  ->  back-end  ->  decode  ->  lift  ->  verify
        ->  settle (the status policy)  ->  Result

One :class:`~milp_partition.budget.Budget`, made once from ``time_limit_s``, reaches every
phase (``Run.budget``); the stop reason is a field of the result (``stopped_by``:
``"time_limit"`` or ``"interrupt"``) and the message's stop note is composed from it.  The exact
phase's model build, its translation for the back-end and the back-end itself each get what is
left of it, at least a second (to report what they have); the build and the translation read it
as rows are added (:func:`~milp_partition.backends.model.build_budget`,
:func:`~milp_partition.backends.base.ticking`) and end the exact phase once it is spent.

Every solution that reaches the policy has been lifted to the original problem
and scored by the problem's independent verifier; every bound is a proven lower
bound of the original problem in real units.

The status policy (:func:`settle`)
----------------------------------
Written once, tested once (``tests/test_chain_policy.py``):

* **objective** is the verifier's value of the best verified solution (never a
  solver's scaled integer).
* **bound** is the largest proven lower bound, from the bound steps, from
  exact heuristics (relaxations, DPs) and from a back-end whose answer was not
  discarded.  A bound above a verified solution is a contradiction: it is
  discarded (the bound is lowered to the largest consistent one) and the
  result's ``discarded`` notes say so.  Within the tolerance below, a bound just
  above the objective is rounding and is clamped to it.
* **optimal**: a verified solution whose value meets the bound:
  ``objective - bound <= PROOF_REL_TOL * |objective| + PROOF_ABS_TOL``.  A
  solver's "optimal" is only a claim; it counts through its bound, and only when
  the solver's decoded solution verifies with the objective the solver reported
  (:data:`OBJECTIVE_MATCH_REL_TOL`) and the back-end has no doubt about the proof
  (``notes["proof_doubtful"]``, e.g. CBC's tolerance warnings).
* **feasible**: a verified solution without such a bound (time limit); the gap is
  ``(objective - bound) / objective``.
* **infeasible**: no verified solution and a proof of infeasibility (an
  exhaustive method, or a back-end on a model without a cutoff).  A back-end
  that says infeasible while a verified solution satisfies its model
  contradicts itself: its answer is discarded (with a note), never turned into
  a proof.
* **unknown**: no verified solution and no proof.
* **error**: only when a step itself failed (an exception in a back-end); the
  best verified solution, if any, is still reported.

An exact heuristic (e.g. PaSE's DP without a memory limit) that proves its own
solution optimal ends the chain before any solver starts.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from milp_partition.backends import Model, SolveOutput, SolveParams, SolveStatus, get_backend
from milp_partition.backends.base import write_line
from milp_partition.backends.cbc import stop_cbc_children
from milp_partition.backends.model import build_budget
from milp_partition.backends.options import BackendOptions, options_for
from milp_partition.budget import Budget
from milp_partition.result import HeuristicRun, Result, Status, StopReason
from milp_partition.settings import CommonSettings, common_fields

#: Relative tolerance of a proof: a verified value within this of a proven bound is optimal.
#: It covers the integer rounding of CP-SAT's scaled coefficients (certified below 1e-7
#: relative, ``milp_partition/backends/scaling.py``) and floating-point sums.
PROOF_REL_TOL = 1e-6
#: Absolute tolerance of a proof, for objectives at or near zero.
PROOF_ABS_TOL = 1e-12
#: Relative tolerance between a back-end's objective and the verifier's before its answer is discarded.
OBJECTIVE_MATCH_REL_TOL = 1e-6


P = TypeVar("P")
S = TypeVar("S")
#: The formulation's own model object (what ``decode`` needs).
M = TypeVar("M")
#: A reduction's inverse data (what ``invert`` needs to lift a solution back).
D = TypeVar("D")


@dataclass(frozen=True)
class Candidate(Generic[S]):
    """A solution of the original problem, the verifier's value of it and its report (for ``Steps.record``)."""

    value: float
    solution: S
    source: str
    report: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class Bound:
    """A proven lower bound of the original problem's objective, in real units."""

    value: float
    source: str


@dataclass(frozen=True)
class SolverClaim:
    """What a back-end said about a model of the problem.

    Attributes
    ----------
    source
        The back-end's name.
    status
        Its translated status.
    bound
        Its proven bound in real units (``None`` when it has none).
    cutoff
        The model was restricted to objective <= ``cutoff`` (a heuristic's value), or ``None``.
    doubtful
        Why its proof may not hold (a tolerance warning, a decoded solution the
        verifier rejects, an objective that disagrees with the verifier's); ``None``
        when there is no reason to doubt it.
    """

    source: str
    status: SolveStatus
    bound: float | None = None
    cutoff: float | None = None
    doubtful: str | None = None


@dataclass(frozen=True)
class Verdict(Generic[S]):
    """The outcome of :func:`settle`."""

    status: Status
    best: Candidate[S] | None
    bound: float | None
    gap: float | None
    message: str
    discarded: tuple[str, ...] = ()


def meets(value: float, bound: float) -> bool:
    """Whether a verified ``value`` meets the proven ``bound`` within the proof tolerance."""
    return value - bound <= PROOF_REL_TOL * abs(value) + PROOF_ABS_TOL


def gap_of(value: float, bound: float | None) -> float | None:
    """``(value - bound) / |value|`` (0 when they meet exactly; ``None`` without a bound).

    At ``value = 0`` a relative gap has no meaning: 0 when the bound meets the value within
    :data:`PROOF_ABS_TOL` (an optimum of 0 is proven like any other), ``None`` otherwise.
    """
    if bound is None or not (math.isfinite(value) and math.isfinite(bound)):
        return None
    if value <= bound:
        return 0.0
    if value == 0:
        return 0.0 if meets(value, bound) else None
    return (value - bound) / abs(value)


def settle(
    candidates: Sequence[Candidate[S]],
    bounds: Sequence[Bound],
    claim: SolverClaim | None = None,
    infeasible_proofs: Sequence[str] = (),
) -> Verdict[S]:
    """Apply the status policy: the one place that decides what a result is.

    Parameters
    ----------
    candidates
        Verified solutions of the original problem (each with the verifier's value).
    bounds
        Proven lower bounds of the original problem.
    claim
        What the back-end said, if one ran.
    infeasible_proofs
        Sources that proved the problem infeasible without a back-end (an exhaustive search).

    Returns
    -------
    Verdict
        Status, best verified candidate, bound, gap, a message and the claims
        discarded as contradictions.
    """
    discarded: list[str] = []
    best = min(candidates, key=lambda c: c.value) if candidates else None
    proven = [b for b in bounds if math.isfinite(b.value)]
    infeasible_by = list(infeasible_proofs)
    if claim is not None and claim.doubtful is not None:
        discarded.append(f"{claim.source}: {claim.status.value} not taken as a proof ({claim.doubtful})")
    elif claim is not None and claim.status is SolveStatus.INFEASIBLE:
        if best is not None and (claim.cutoff is None or best.value <= claim.cutoff * (1 + PROOF_REL_TOL) + PROOF_ABS_TOL):
            discarded.append(
                f"{claim.source} said infeasible although {best.source}'s verified solution "
                f"(value {best.value!r}) satisfies its model: its answer is not used"
            )
        elif claim.cutoff is not None:
            proven.append(Bound(claim.cutoff, f"{claim.source} (nothing at or below the cutoff)"))
        else:
            infeasible_by.append(claim.source)
    elif claim is not None and claim.bound is not None and math.isfinite(claim.bound):
        proven.append(Bound(claim.bound, claim.source))

    if best is not None and infeasible_by:
        discarded.append(
            f"{', '.join(infeasible_by)} proved infeasibility although {best.source}'s solution verifies: proof not used"
        )
        infeasible_by = []

    bound: Bound | None = None
    for b in sorted(proven, key=lambda b: -b.value):
        if best is not None and b.value - best.value > PROOF_REL_TOL * abs(best.value) + PROOF_ABS_TOL:
            discarded.append(
                f"bound {b.value!r} from {b.source} is above the verified value {best.value!r} from {best.source}: "
                "a contradiction, the bound is not used"
            )
            continue
        bound = b
        break
    bound_value = None if bound is None else (min(bound.value, best.value) if best is not None else bound.value)

    if best is None:
        if infeasible_by:
            return Verdict(
                Status.INFEASIBLE, None, None, None, f"proven infeasible by {', '.join(infeasible_by)}", tuple(discarded)
            )
        return Verdict(Status.UNKNOWN, None, bound_value, None, "no feasible solution found within the limits", tuple(discarded))
    gap = gap_of(best.value, bound_value)
    if bound is not None and bound_value is not None and meets(best.value, bound_value):
        how = (
            f"proven optimal by {best.source}"
            if bound.source == best.source
            else f"proven optimal: {best.source}'s value meets the bound from {bound.source}"
        )
        return Verdict(Status.OPTIMAL, best, bound_value, gap, how, tuple(discarded))
    if bound is None:
        return Verdict(Status.FEASIBLE, best, None, None, f"best solution from {best.source}; no proven bound", tuple(discarded))
    return Verdict(
        Status.FEASIBLE,
        best,
        bound_value,
        gap,
        f"best solution from {best.source}; bound from {bound.source}",
        tuple(discarded),
    )


# --------------------------------------------------------------------------- the chain


@dataclass(frozen=True)
class ChainSettings(CommonSettings):
    """What every problem's chain reads: the common settings (:class:`~milp_partition.settings.CommonSettings`, whose
    ``time_limit_s`` or ``budget`` :func:`run_chain` turns into the run's one
    :class:`~milp_partition.budget.Budget`; ``solver``, ``threads``, ``seed`` and ``warm_start`` reach the back-end)
    and the back-ends' own options.

    Attributes
    ----------
    backend_options
        Options of back-ends (:mod:`milp_partition.backends.options`, at most one per back-end): the solving
        back-end (``solver``) gets its own (:func:`~milp_partition.backends.options.options_for`), the others' are
        not used.
    """

    backend_options: tuple[BackendOptions, ...] = ()


def chain_settings(settings: CommonSettings) -> ChainSettings:
    """The chain's settings from a problem's own settings: their common part (and back-end options, where it has some)."""
    return ChainSettings(
        **common_fields(settings.common),  # type: ignore[arg-type]
        backend_options=tuple(getattr(settings, "backend_options", ()) or ()),
    )


class Reduction(Protocol[P, S, D]):
    """An exact transformation of the problem, in the manner of cvxpy's ``Reduction``.

    ``apply(problem) -> (reduced problem, inverse data)``; ``invert(solution, inverse data)``
    lifts a solution of the reduced problem to one of the problem it was applied to;
    ``notes(reduced)`` says what the reduction left (for ``solver_notes``).  The chain keeps
    the inverse data of every reduction it applied and inverts them in reverse order.
    """

    @property
    def name(self) -> str: ...

    def apply(self, problem: P) -> tuple[P, D]: ...

    def invert(self, solution: S, inverse_data: D) -> S: ...

    def notes(self, reduced: P) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Applied(Generic[P, S]):
    """A reduction the chain applied, with its inverse data."""

    reduction: Reduction[P, S, Any]
    inverse_data: Any

    def invert(self, solution: S) -> S:
        return self.reduction.invert(solution, self.inverse_data)


@dataclass
class Run(Generic[P, S]):
    """The state of one run of the chain that the chain owns and hands to every step.

    A problem's own per-run values (a Lagrangian result for the refinement, tied
    groups for the formulation, ...) are not here: they live in its ``Steps`` object's
    typed state dataclass.

    Attributes
    ----------
    problem
        The original problem (verification is always on it).
    work
        The problem the steps work on (after reductions and refinements).
    settings
        The chain's settings.
    result
        The result being filled.
    budget
        The one time budget of the run: every phase takes it (or a value derived from it at the call).
    applied
        The reductions applied so far with their inverse data (:meth:`lift` inverts them).
    candidates, bounds
        Verified solutions (of ``problem``) and proven bounds collected so far.
    infeasible_proofs
        Steps that proved the problem infeasible.
    skip_solver
        A reason not to run the back-end (set by a step), or ``None``.
    stopped_by
        Why a phase stopped early (its time limit, or an interrupt), or ``None``.
    """

    problem: P
    work: P
    settings: ChainSettings
    result: Result
    budget: Budget
    applied: list[Applied[P, S]] = field(default_factory=list)
    candidates: list[Candidate[S]] = field(default_factory=list)
    bounds: list[Bound] = field(default_factory=list)
    infeasible_proofs: list[str] = field(default_factory=list)
    skip_solver: str | None = None
    stopped_by: StopReason | None = None
    #: Claims dropped as contradictions before the policy (e.g. the bound of an exact method whose own solution
    #: the verifier rejects); they lead the result's ``discarded`` notes.
    discarded: list[str] = field(default_factory=list)
    #: What the chain is doing now, for the progress lines of :class:`PhaseTicker` (``""``: the back-end prints its own).
    phase: str = ""

    def lift(self, solution: S) -> S:
        """A solution of ``work`` as a solution of ``problem`` (the reductions' inverses, last first)."""
        for applied in reversed(self.applied):
            solution = applied.invert(solution)
        return solution

    def stop(self, reason: StopReason) -> None:
        """Record why a phase stopped early (an interrupt outranks a time limit)."""
        if self.stopped_by != "interrupt":
            self.stopped_by = reason

    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C or SIGTERM stopped a phase: the chain then settles on what it has."""
        return self.stopped_by == "interrupt"

    def say(self, text: str) -> None:
        """A progress line on stderr (unless progress output is off)."""
        say(self.settings.progress_interval_s, text)

    @property
    def best(self) -> Candidate[S] | None:
        """The best verified solution so far."""
        return min(self.candidates, key=lambda c: c.value) if self.candidates else None

    @property
    def lower(self) -> float | None:
        """The best proven bound so far (``None`` when none)."""
        finite = [b.value for b in self.bounds if math.isfinite(b.value)]
        return max(finite) if finite else None

    def proven_optimal(self) -> bool:
        """Whether the best verified solution already meets a proven bound."""
        best, lower = self.best, self.lower
        return best is not None and lower is not None and meets(best.value, lower)


@dataclass(frozen=True)
class Evaluation(Generic[S]):
    """The verifier's word on a solution: feasible or not, its value, (optionally) a canonical form of it, and its report.

    The report travels with the candidate, so that ``Steps.record`` does not verify the best solution again.
    """

    feasible: bool
    value: float
    violations: tuple[str, ...] = ()
    solution: S | None = None
    report: Any = None

    def __post_init__(self) -> None:
        # a value that is not a finite number is never verified, whatever the verifier said
        if self.feasible and not (isinstance(self.value, (int, float)) and math.isfinite(self.value)):
            object.__setattr__(self, "feasible", False)
            object.__setattr__(self, "violations", (*self.violations, f"the objective {self.value!r} is not a finite number"))


@dataclass(frozen=True)
class Outcome(Generic[S]):
    """What a heuristic (or a refinement) produced on the working problem.

    ``solution`` is a solution of the working problem (the chain lifts and verifies
    it); ``bound`` a proven lower bound of the *original* problem; ``exact`` that the
    method is exact (its solution is optimal when ``bound`` meets it);
    ``infeasible`` that the method proved the problem infeasible; ``value`` the
    method's own value of its solution (compared with the verifier's); ``original``
    that ``solution`` is already a solution of the original problem (no lift);
    ``stopped_by`` that the method stopped early (its budget ran out, or an interrupt:
    the chain then settles on what it has, with this outcome counted).
    """

    name: str
    solution: S | None
    seconds: float = 0.0
    exact: bool = False
    message: str = ""
    bound: float | None = None
    infeasible: bool = False
    value: float | None = None
    original: bool = False
    stopped_by: StopReason | None = None


@dataclass
class Built(Generic[M]):
    """A formulation built for the back-end: the solver-neutral model and the formulation's own object (for decode)."""

    model: Model
    state: M
    cutoff: float | None = None
    #: False when the model is a restriction of the problem (e.g. tied blocks): its solution
    #: counts, but its bound and its "infeasible" prove nothing about the problem.
    proves: bool = True


class Formulation(Protocol[P, S, M]):
    """A problem's integer program as the chain uses it: ``build``, ``hint``, ``decode``.

    Each ``formulations/<problem>.py`` module has the three functions; a small adapter in
    the problem's ``solve.py`` fits them to this protocol (it knows the settings and reads
    the run: its best solution for the cutoff, its bound, its working problem).
    ``build`` returns ``None`` when there is no model to solve.
    """

    def build(self, run: Run[P, S]) -> Built[M] | None: ...

    def hint(self, built: Built[M], run: Run[P, S], candidate: Candidate[S]) -> None: ...

    def decode(self, built: Built[M], values: Sequence[float]) -> S: ...


class Steps(Protocol[P, S]):
    """The problem-specific steps that :func:`run_chain` plugs together, for problem type ``P`` and solution type ``S``.

    ``new_result`` makes the empty result; ``verify`` is the problem's independent
    verifier; ``reductions`` are applied first (solutions are lifted back through
    them); ``bounds`` yields proven bounds; ``heuristics`` and ``refine`` yield
    :class:`Outcome` objects (``refine`` runs only when nothing is proven yet);
    ``formulation`` is the integer program (``None``: no exact model);
    ``record`` writes the problem-specific fields of the best solution into the result.

    A ``Steps`` object serves one run: what one step hands to a later one lives in its
    own typed state dataclass (made with the object), never in a shared dict.
    """

    @property
    def name(self) -> str: ...

    @property
    def formulation(self) -> Formulation[P, S, Any] | None: ...

    def new_result(self, problem: P, settings: ChainSettings) -> Result: ...

    def verify(self, problem: P, solution: S) -> Evaluation[S]: ...

    def reductions(self, run: Run[P, S]) -> Sequence[Reduction[P, S, Any]]: ...

    def bounds(self, run: Run[P, S]) -> Iterable[Bound]: ...

    def heuristics(self, run: Run[P, S]) -> Iterable[Outcome[S]]: ...

    def refine(self, run: Run[P, S]) -> Iterable[Outcome[S]]: ...

    def record(self, result: Result, problem: P, best: Candidate[S]) -> None: ...


class StepDefaults(Generic[P, S]):
    """Defaults for the optional steps of :class:`Steps`: no reductions, no bounds, no refinement.

    A problem's steps inherit from it and override what they have.
    """

    def reductions(self, run: Run[P, S]) -> Sequence[Reduction[P, S, Any]]:
        return ()

    def bounds(self, run: Run[P, S]) -> Iterable[Bound]:
        return ()

    def refine(self, run: Run[P, S]) -> Iterable[Outcome[S]]:
        return ()


def add_outcome(run: Run[P, S], steps: Steps[P, S], out: Outcome[S]) -> float | None:
    """Lift, verify and record one heuristic outcome; return its verified value (``None`` when none)."""
    value: float | None = None
    message = out.message
    rejected = False
    if out.solution is not None:
        lifted = out.solution if out.original else run.lift(out.solution)
        ev = steps.verify(run.problem, lifted)
        if ev.feasible:
            value = ev.value
            run.candidates.append(Candidate(value, ev.solution if ev.solution is not None else lifted, out.name, ev.report))
            if out.value is not None and not math.isclose(value, out.value, rel_tol=1e-9, abs_tol=1e-12):
                message += f" (verifier value {value!r} differs from the method's {out.value!r})"
        else:
            message += "; verifier rejected it: " + "; ".join(ev.violations[:3])
            rejected = True
    if rejected and out.exact and (out.bound is not None or out.infeasible):
        # an exact method whose own answer is wrong proves nothing: its bound and its "infeasible" are dropped
        run.discarded.append(
            f"{out.name}: the verifier rejected its solution, so its bound {out.bound!r} and any proof are not used"
        )
    else:
        if out.bound is not None and math.isfinite(out.bound):
            run.bounds.append(Bound(out.bound, out.name))
        if out.infeasible:
            run.infeasible_proofs.append(out.name)
    if out.stopped_by is not None:
        run.stop(out.stopped_by)
    run.result.heuristics.append(HeuristicRun(out.name, value, out.seconds, out.exact, message))
    shown = f"value {value:.12g}" if value is not None else "no solution"  # the message says why
    run.say(f"[{out.name}] {shown} in {out.seconds:.2f}s" + (f": {message}" if message else ""))
    return value


def run_chain(steps: Steps[P, S], problem: P, settings: ChainSettings, budget: Budget | None = None) -> Result:
    """Run every step for ``problem`` and return a verified :class:`Result` (see the module docstring).

    ``budget`` is the run's one time budget; by default it is ``settings.budget`` (a deadline shared with the
    caller), else made here from ``settings.time_limit_s``, starting now (a test passes one that is already spent).
    """
    budget = settings.start() if budget is None else budget
    run: Run[P, S] = Run(problem, problem, settings, steps.new_result(problem, settings), budget)
    with PhaseTicker(run, steps.name):
        return _run_steps(run, steps)


def _run_steps(run: Run[P, S], steps: Steps[P, S]) -> Result:
    """The body of :func:`run_chain`: every step in order, then the policy."""
    settings, result = run.settings, run.result
    run.phase = "reductions"
    for reduction in steps.reductions(run):
        t0 = time.monotonic()
        reduced, inverse_data = reduction.apply(run.work)
        run.work = reduced
        run.applied.append(Applied(reduction, inverse_data))
        result.solver_notes[reduction.name] = {"seconds": time.monotonic() - t0, **reduction.notes(reduced)}
    claim: SolverClaim | None = None
    try:
        run.phase = "bounds"
        for b in steps.bounds(run):
            run.bounds.append(b)
        run.phase = "heuristics"
        _add_all(run, steps, steps.heuristics(run))
        if not run.interrupted and not run.proven_optimal() and not run.infeasible_proofs:
            run.phase = "refinement"
            _add_all(run, steps, steps.refine(run))
        if (
            settings.solver != "none"
            and not run.interrupted
            and not run.proven_optimal()
            and not run.infeasible_proofs
            and run.skip_solver is None
        ):
            claim = _solve_exact(run, steps)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (the CLI raises it for both): settle on what is verified so far
        run.stop("interrupt")
    run.phase = "settling"
    if run.interrupted:
        stop_cbc_children()
    _finish(run, steps, claim)
    run.say(  # the solver's progress lines show its own model; this is the reconciled answer
        f"[result] {result.status} objective {'-' if result.objective is None else format(result.objective, '.10g')} bound "
        f"{'-' if result.bound is None else format(result.bound, '.10g')} gap "
        f"{f'{100 * result.gap:.3g}%' if result.gap is not None else '-'} (best verified value, best proven bound)"
    )
    return result


class PhaseTicker:
    """Prints ``[name] elapsed  phase; best verified value, best bound`` every ``progress_interval_s`` while the
    chain is in a phase of its own (bounds, heuristics, model build): a long phase was silent before the back-end's
    progress lines began (issue 43 item 8).  Silent when progress output is off or ``run.phase`` is ``""``.
    """

    def __init__(self, run: Run[Any, Any], name: str) -> None:
        self.run = run
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def line(self) -> str | None:
        """The progress line now, or ``None`` when the back-end is the one to print."""
        run = self.run
        phase = run.phase
        if not phase:
            return None
        best = min((c.value for c in run.candidates), default=None)  # a snapshot: the list only grows
        bounds = [b.value for b in run.bounds if math.isfinite(b.value)]
        shown = f"best verified {best:.6g}" if best is not None else "no verified solution yet"
        if bounds:
            shown += f", bound {max(bounds):.6g}"
        return f"[{self.name}] {run.budget.elapsed():7.1f}s  {phase}; {shown}"

    def __enter__(self) -> PhaseTicker:
        interval = self.run.settings.progress_interval_s
        if interval:
            self._thread = threading.Thread(target=self._loop, args=(interval,), name="chain-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            text = self.line()
            if text is not None:
                write_line(sys.stderr, text)


def _add_all(run: Run[P, S], steps: Steps[P, S], outcomes: Iterable[Outcome[S]]) -> None:
    """Add each outcome; an interrupted method's outcome is the last one taken."""
    for out in outcomes:
        add_outcome(run, steps, out)
        if run.interrupted:
            return


def nested(result: Result) -> Result:
    """A nested chain's result (a quick solve, a segment, a tied problem): re-raise the interrupt it caught.

    :func:`run_chain` turns Ctrl-C or SIGTERM into a result; a chain that runs another one
    must stop too, so the interrupt travels up to the outermost chain, which settles on what
    it has verified.
    """
    if result.stopped_by == "interrupt":
        raise KeyboardInterrupt
    return result


def _solve_exact(run: Run[P, S], steps: Steps[P, S]) -> SolverClaim | None:
    """Build, hint, solve, decode, lift and verify; the back-end's answer becomes a claim for :func:`settle`."""
    formulation = steps.formulation
    if formulation is None:
        return None
    run.phase = "model build"
    # the build gets what is left of the one budget (at least a second, as the back-end below); a large model's rows
    # read it as they are added (:func:`~milp_partition.backends.model.build_budget`)
    try:
        with build_budget(Budget.starting_now(max(1.0, run.budget.left()), run.budget.clock)):
            built = formulation.build(run)
    except TimeoutError:
        run.stop("time_limit")
        run.say(f"[{run.settings.solver}] the time limit ran out while the model was built: no exact solve")
        return None
    if built is None:
        return None
    run.phase = ""  # the back-end prints its own progress lines (the translation of the model, then the search)
    best = run.best
    if best is not None and run.settings.warm_start:
        formulation.hint(built, run, best)
        run.result.warm_start = {"source": best.source, "objective": best.value}
    # the back-end gets what is left of the one budget (at least a second, to report what it has); the
    # translation of the model for the solver reads the same budget and stops once it is spent
    seconds = max(1.0, run.budget.left())
    try:
        out = run_backend(
            run.result,
            replace(run.settings, time_limit_s=seconds),
            built.model,
            Budget.starting_now(seconds, run.budget.clock),
        )
    except TimeoutError:
        run.stop("time_limit")
        run.say(f"[{run.settings.solver}] the time limit ran out while the model was translated for the solver: no exact solve")
        return None
    source = run.settings.solver
    bound = out.bound if math.isfinite(out.bound) else None
    doubtful = out.notes.get("proof_doubtful")
    doubt = str(doubtful) if doubtful else None
    if out.status is SolveStatus.ERROR:
        run.result.solver_notes["solver_error"] = True
    if out.interrupted:
        run.stop("interrupt")
    elif out.status in (SolveStatus.FEASIBLE, SolveStatus.UNKNOWN):
        run.stop("time_limit")  # the back-end stopped at its limit without a proof
    if out.values is not None and out.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        solution = run.lift(formulation.decode(built, out.values))
        ev = steps.verify(run.problem, solution)
        if not ev.feasible:
            doubt = "the verifier rejected its solution: " + "; ".join(ev.violations[:5])
        else:
            slack = OBJECTIVE_MATCH_REL_TOL * max(abs(ev.value), abs(out.objective)) + PROOF_ABS_TOL
            rounding = out.notes.get("rounding_error", 0.0)
            slack += float(rounding) if isinstance(rounding, (int, float)) else 0.0
            if ev.value > out.objective + slack:
                doubt = f"the verifier's value {ev.value!r} is above the solver's objective {out.objective!r}"
            run.candidates.append(Candidate(ev.value, ev.solution if ev.solution is not None else solution, source, ev.report))
    if not built.proves:
        return None
    return SolverClaim(source, out.status, bound, built.cutoff, doubt)


def stop_note(stopped_by: StopReason | None, status: Status) -> str:
    """The message's note on why the solve stopped, composed from ``stopped_by`` (``""``: none)."""
    if stopped_by == "time_limit" and status is Status.FEASIBLE:
        return "; time limit reached"
    return ""


def _finish(run: Run[P, S], steps: Steps[P, S], claim: SolverClaim | None) -> None:
    """Settle the status, the stop reason and the message, and fill the result from the best verified solution."""
    verdict = settle(run.candidates, run.bounds, claim, run.infeasible_proofs)
    result = run.result
    result.status = verdict.status
    result.bound = verdict.bound
    result.gap = verdict.gap
    result.discarded = [*run.discarded, *verdict.discarded]
    message = verdict.message
    if claim is not None and claim.status is SolveStatus.ERROR and verdict.status is not Status.OPTIMAL:
        message += "; the solver failed (see solver_log)"
        if verdict.best is None:
            result.status = Status.ERROR
    stopped_by = run.stopped_by
    if stopped_by is None and run.budget.expired() and result.status in (Status.FEASIBLE, Status.UNKNOWN):
        stopped_by = "time_limit"  # a phase used the whole budget and nothing is proven
    if stopped_by == "time_limit" and result.status not in (Status.FEASIBLE, Status.UNKNOWN):
        stopped_by = None  # proven (or failed) all the same: the limit cut nothing short
    result.stopped_by = stopped_by
    if stopped_by == "interrupt":
        found = "the best verified solution found before it" if verdict.best is not None else "no solution found before it"
        result.message = f"interrupted; {found}" + (f" ({message})" if message else "")
    else:
        result.message = message + stop_note(stopped_by, result.status)
    if verdict.best is not None:
        result.objective = verdict.best.value
        steps.record(result, run.problem, verdict.best)
    for note in result.discarded:
        run.say(f"[policy] {note}")
    result.solve_seconds = run.budget.elapsed()


# --------------------------------------------------------------------------- back-end call and progress


def say(progress_interval_s: float | None, text: str) -> None:
    """Print a line on stderr unless progress output is off (``None``)."""
    if progress_interval_s is not None:
        write_line(sys.stderr, text)


def run_backend(result: Result, settings: ChainSettings, model: Model, budget: Budget | None = None) -> SolveOutput:
    """Solve ``model`` with ``settings.solver``; record its time, notes, log and first incumbent in ``result``.

    ``budget`` bounds the whole call, the model's translation for the solver included (which raises
    :class:`TimeoutError` once it is spent).
    """
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
        options=options_for(settings.backend_options, settings.solver),
        budget=budget,
    )
    out = get_backend(settings.solver).solve(model, params)
    result.solver_seconds += out.wall_seconds
    result.solver_notes.update(out.notes)
    result.solver_log = out.log
    if result.warm_start:
        result.warm_start["first_incumbent"] = out.first_incumbent
    return out
