"""Checks of a time-limited exact solve that hold at any machine speed.

A solve under a wall-clock limit may end ``optimal`` on an idle machine and ``feasible``
on a loaded one.  What holds either way against a known optimum ``z*``: the verified
objective is at least ``z*`` (no solution beats the optimum), the bound is at most
``z*`` (a bound above it would be a false proof), and ``optimal`` is claimed only with
the objective equal to ``z*``.
"""

from __future__ import annotations

from milp_partition.result import Result


def assert_consistent_with_optimum(result: Result, optimum: float, rel_tol: float = 1e-6) -> None:
    """Assert what a time-limited solve must satisfy against a known ``optimum``, whatever the machine's speed."""
    tol = rel_tol * max(1.0, abs(optimum))
    assert result.status in ("optimal", "feasible"), result.message
    assert result.objective is not None and result.objective >= optimum - tol, (result.objective, optimum)
    if result.bound is not None:
        assert result.bound <= optimum + tol, f"bound {result.bound} above the known optimum {optimum}: a false proof"
    if result.status == "optimal":
        assert abs(result.objective - optimum) <= tol, (result.objective, optimum)
