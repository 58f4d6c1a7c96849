"""The one status policy (:func:`milp_partition.chain.settle`), tested on its own."""

from __future__ import annotations

import math

import pytest

from milp_partition.backends import SolveStatus
from milp_partition.chain import PROOF_REL_TOL, Bound, Candidate, SolverClaim, settle
from milp_partition.result import Status


def cand(value: float, source: str = "h") -> Candidate[str]:
    return Candidate(value, f"solution of {source}", source)


def test_optimal_needs_a_verified_solution_meeting_a_proven_bound() -> None:
    v = settle([cand(10.0, "dp"), cand(12.0, "greedy")], [Bound(10.0, "dp")])
    assert v.status is Status.OPTIMAL and v.best is not None and v.best.source == "dp"
    assert v.bound == 10.0 and v.gap == 0.0 and not v.discarded


def test_within_tolerance_is_optimal_and_beyond_is_feasible() -> None:
    inside = settle([cand(1.0)], [Bound(1.0 - 0.5 * PROOF_REL_TOL, "b")])
    assert inside.status is Status.OPTIMAL and inside.gap == pytest.approx(0.5 * PROOF_REL_TOL)
    outside = settle([cand(1.0)], [Bound(1.0 - 3 * PROOF_REL_TOL, "b")])
    assert outside.status is Status.FEASIBLE and outside.gap == pytest.approx(3 * PROOF_REL_TOL)


def test_bound_is_the_largest_proven_one() -> None:
    v = settle([cand(10.0)], [Bound(4.0, "a"), Bound(7.0, "b"), Bound(-math.inf, "c")])
    assert v.status is Status.FEASIBLE and v.bound == 7.0 and v.gap == pytest.approx(0.3)


def test_solver_optimal_claim_counts_through_its_bound_only() -> None:
    # the solver says optimal but its bound is far below the verified value: not a proof
    claim = SolverClaim("cbc", SolveStatus.OPTIMAL, bound=9.0)
    v = settle([cand(10.0, "cbc")], [], claim)
    assert v.status is Status.FEASIBLE and v.bound == 9.0
    ok = settle([cand(10.0, "cbc")], [], SolverClaim("cbc", SolveStatus.OPTIMAL, bound=10.0 - 1e-9))
    assert ok.status is Status.OPTIMAL


def test_doubtful_claims_prove_nothing() -> None:
    claim = SolverClaim("cbc", SolveStatus.OPTIMAL, bound=10.0, doubtful="postprocessing changed the objective")
    v = settle([cand(10.0, "cbc")], [Bound(8.0, "dp")], claim)
    assert v.status is Status.FEASIBLE and v.bound == 8.0
    assert len(v.discarded) == 1 and "postprocessing" in v.discarded[0]


def test_bound_above_a_verified_solution_is_discarded_and_lowered() -> None:
    v = settle([cand(10.0, "heft")], [Bound(12.0, "buggy"), Bound(9.0, "sound")])
    assert v.status is Status.FEASIBLE and v.bound == 9.0
    assert any("buggy" in d and "above the verified value" in d for d in v.discarded)
    # just above within the tolerance is rounding: clamped to the objective, optimal
    r = settle([cand(10.0)], [Bound(10.0 * (1 + 0.1 * PROOF_REL_TOL), "rounded")])
    assert r.status is Status.OPTIMAL and r.bound == 10.0 and not r.discarded


def test_infeasible_claims() -> None:
    # no solution anywhere, no cutoff: a proof
    v = settle([], [], SolverClaim("cpsat", SolveStatus.INFEASIBLE))
    assert v.status is Status.INFEASIBLE and v.best is None
    # a cutoff at a heuristic's value that the heuristic's own solution meets: a contradiction
    c = settle([cand(5.0, "heft")], [Bound(3.0, "cp")], SolverClaim("cpsat", SolveStatus.INFEASIBLE, cutoff=5.0))
    assert c.status is Status.FEASIBLE and c.bound == 3.0 and c.discarded
    # a cutoff below every verified value: nothing at or below it exists, so the cutoff is a bound
    s = settle([cand(5.0, "heft")], [], SolverClaim("cpsat", SolveStatus.INFEASIBLE, cutoff=4.0))
    assert s.status is Status.FEASIBLE and s.bound == 4.0 and not s.discarded
    # an exhaustive proof of infeasibility beside a verified solution is refused
    e = settle([cand(5.0)], [], None, infeasible_proofs=["dp"])
    assert e.status is Status.FEASIBLE and e.discarded
    only = settle([], [], None, infeasible_proofs=["dp"])
    assert only.status is Status.INFEASIBLE


def test_unknown_keeps_its_bound() -> None:
    v = settle([], [Bound(3.0, "lp")], SolverClaim("cpsat", SolveStatus.UNKNOWN))
    assert v.status is Status.UNKNOWN and v.best is None and v.bound == 3.0 and v.gap is None


def test_feasible_without_any_bound() -> None:
    v = settle([cand(2.0)], [], SolverClaim("cpsat", SolveStatus.FEASIBLE))
    assert v.status is Status.FEASIBLE and v.bound is None and v.gap is None


def test_objective_zero() -> None:
    v = settle([cand(0.0)], [Bound(0.0, "trivial")])
    assert v.status is Status.OPTIMAL and v.gap == 0.0


def test_report_shows_what_the_policy_discarded() -> None:
    from milp_partition.report import run_lines
    from milp_partition.result import Result

    result = Result("pipeline", "cbc", discarded=["cbc: optimal not taken as a proof (postprocessing warning)"])
    assert any(line.startswith("discarded  cbc: optimal not taken") for line in run_lines(result))
    assert not any(line.startswith("discarded") for line in run_lines(Result("pipeline", "cbc")))


def test_nested_chain_passes_an_interrupt_up() -> None:
    """A chain run inside another (quick solve, segment, tied problem) re-raises the interrupt it turned into a result."""
    from milp_partition.chain import nested
    from milp_partition.result import Result

    calm = Result("placement", "cpsat")
    assert nested(calm) is calm
    noted = Result("placement", "cpsat", solver_notes={"interrupted": True})
    assert nested(noted) is noted  # a note is text, never control flow: the stop reason is the typed field
    stopped = Result("placement", "cpsat", stopped_by="interrupt")
    with pytest.raises(KeyboardInterrupt):
        nested(stopped)
