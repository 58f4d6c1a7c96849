"""CBC's power-of-two scaling, its explicit tolerances, and the check that downgrades doubtful proofs."""

from __future__ import annotations

import math

import pytest
from placement_brute_force import brute_force_makespan
from test_proof_soundness import placement_instance

from milp_partition.backends import Model, Sense, SolveParams, SolveStatus, VarKind, get_backend
from milp_partition.backends import cbc as cbc_module
from milp_partition.backends.cbc_scaling import (
    CbcTolerances,
    doubtful_proof,
    optimal_bound_slack,
    scale_for_cbc,
)
from milp_partition.placement.solve import PlacementSolveSettings, solve_placement


def _mixed_units_model(hint: bool) -> Model:
    """A memory row in bytes beside a time row in seconds: the mix that broke CBC."""
    m = Model("mixed")
    x = [m.add_var(f"x{i}") for i in range(3)]
    t = m.add_var("t", VarKind.CONTINUOUS, 0.0, 1.0)
    m.add_constraint([(v, 1.0) for v in x], Sense.EQ, 1.0, "onehot")
    m.add_constraint([(x[0], 3.0e9), (x[1], 1.5e9), (x[2], 0.7e9)], Sense.LE, 2.0e9, "memory")
    m.add_constraint([(x[0], 4.0e-5), (x[1], 5.0e-5), (x[2], 5.00001e-5), (t, -1.0)], Sense.LE, 0.0, "time")
    m.minimize([(t, 1.0)])
    if hint:
        for i, v in enumerate(x):
            m.set_hint(v, 1.0 if i == 2 else 0.0)
        m.set_hint(t, 5.00001e-5)
    return m


def test_rows_are_divided_by_a_power_of_two_exactly() -> None:
    model = _mixed_units_model(hint=False)
    scaled = scale_for_cbc(model)
    for row, c in zip(scaled.rows, model.constraints):
        assert math.log2(row.scale) == round(math.log2(row.scale))  # a power of two
        assert 2**-0.5 <= max(abs(a) for a in row.terms.values()) <= 2**0.5
        assert all(row.terms[i] * row.scale == a for i, a in c.terms.items())  # no bit lost
        assert row.rhs * row.scale == c.rhs
    assert scaled.rows[1].scale == 2.0**31  # 3e9 bytes
    assert scaled.objective_scale == 1.0  # t's coefficient is 1 and there is no hint


def test_objective_scale_follows_the_hint() -> None:
    scaled = scale_for_cbc(_mixed_units_model(hint=True))
    assert scaled.objective_scale == 2.0**14  # 1 / 5.00001e-5 ~ 2**14.3
    assert scaled.to_model_units(scaled.objective_scale * 5.00001e-5) == pytest.approx(5.00001e-5, rel=1e-15)


def test_tolerances_are_on_the_command_line() -> None:
    options = CbcTolerances().options()
    for name in ("integerTolerance", "primalTolerance", "dualTolerance", "allowableGap", "ratioGap", "increment"):
        assert any(o.startswith(name + " ") for o in options), name


def test_cbc_finds_the_optimum_that_differs_in_the_sixth_digit() -> None:
    """x1 (5.0e-5 s, 1.5e9 bytes) beats the hinted x2 (5.00001e-5 s) by 1e-10 s; CBC's default increment is 1e-5."""
    model = _mixed_units_model(hint=True)
    out = get_backend("cbc").solve(model, SolveParams(time_limit_s=30, threads=1))
    assert out.status is SolveStatus.OPTIMAL, out.notes
    assert out.values is not None and round(out.values[1]) == 1
    assert out.objective == pytest.approx(5.0e-5, rel=1e-7)
    assert out.bound <= 5.0e-5
    assert "proof_doubtful" not in out.notes


def test_bound_slack_covers_the_stopping_rule() -> None:
    model = _mixed_units_model(hint=True)
    scaled = scale_for_cbc(model)
    tol = CbcTolerances(allowable_gap=1e-6, increment=1e-6, ratio_gap=1e-3)
    values = [0.0, 1.0, 0.0, 5.0e-5]
    slack = optimal_bound_slack(model, values, scaled, tol)
    assert slack >= 2e-6 / scaled.objective_scale + 1e-3 * 5.0e-5


CLEAN_LOG = "Result - Optimal solution found\n\nObjective value:                1.56152729\n"


@pytest.mark.parametrize(
    "log,objective,bound,why",
    [
        (CLEAN_LOG, 1.56152729, 1.5615, None),
        (
            "Cgl0014I Postprocessing changed objective from 0.049514886 to 0.048800185 - possible tolerance issue\n" + CLEAN_LOG,
            1.56152729,
            1.5615,
            "Postprocessing changed objective",
        ),
        (CLEAN_LOG, 1.5616, 1.5615, "differs from its solution's"),
        (CLEAN_LOG, 1.56152729, 1.6, "lies above"),
    ],
)
def test_doubtful_proofs_are_named(log: str, objective: float, bound: float, why: str | None) -> None:
    scaled = scale_for_cbc(_mixed_units_model(hint=False))  # objective scale 1
    reason = doubtful_proof(log, objective, bound, scaled)
    if why is None:
        assert reason is None
    else:
        assert reason is not None and why in reason


def test_a_doubtful_optimum_is_reported_feasible_without_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cbc_module, "doubtful_proof", lambda *a: "CBC warned: a test")
    out = get_backend("cbc").solve(_mixed_units_model(hint=False), SolveParams(time_limit_s=30, threads=1))
    assert out.status is SolveStatus.FEASIBLE
    assert out.bound == -math.inf
    assert out.notes["proof_doubtful"] == "CBC warned: a test"
    assert out.values is not None and out.objective == pytest.approx(5.0e-5, rel=1e-7)


def test_continuous_columns_are_scaled_to_about_one_and_back() -> None:
    m = Model("columns")
    x = m.add_var("x")
    s = m.add_var("s", VarKind.CONTINUOUS, 0.0, 1.2e-5)
    m.add_constraint([(s, 1.0), (x, -3.0e-6)], Sense.GE, 0.0, "precedence")
    m.minimize([(s, 1.0)])
    scaled = scale_for_cbc(m)
    assert scaled.column_scale == [1.0, 2.0**-16]
    assert scaled.bounds[1][1] == 1.2e-5 * 2.0**16
    assert scaled.to_model_values([1.0, 0.25]) == [1.0, 0.25 * 2.0**-16]
    assert scaled.to_cbc_value(1, 2e-5) == scaled.bounds[1][1]  # a hint outside the bounds is clamped


def test_cbc_proves_the_brute_force_optimum_of_placement_seed_30702() -> None:
    """Three tasks of 1e-6 s on three devices: unscaled, CBC's root cuts removed the optimum and it "proved" 3.0745e-6."""
    problem = placement_instance(30702)
    result = solve_placement(problem, PlacementSolveSettings(solver="cbc", heuristics=(), time_limit_s=30, threads=1))
    assert result.status == "optimal"
    assert result.objective == pytest.approx(3.0224e-06, rel=1e-12) == brute_force_makespan(problem)
    assert result.bound <= 3.0224e-06
