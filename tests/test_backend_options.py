"""Issue 41 item 3: solver specifics live in each back-end's own options (``backends/options.py``), not in
``SolveParams``; a back-end refuses another's options, and its own reach the solver."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from milp_partition.backends import Model, Sense, SolveOutput, SolveParams, SolveStatus, VarKind, get_backend
from milp_partition.backends.options import OPTIONS_CLASSES, CbcOptions, CpSatOptions, options_for
from milp_partition.backends.registry import BACKENDS, installed
from milp_partition.chain import ChainSettings, run_backend
from milp_partition.errors import InputError
from milp_partition.result import Result


def _model() -> Model:
    """min x + 2y with x + y >= 3, x <= 2 (integers): optimum 4 (x = 2, y = 1)."""
    m = Model("tiny")
    x = m.add_var("x", VarKind.INTEGER, 0, 2)
    y = m.add_var("y", VarKind.INTEGER, 0, 5)
    m.add_constraint([(x, 1), (y, 1)], Sense.GE, 3)
    m.minimize([(x, 1), (y, 2)])
    return m


def test_solve_params_carry_no_solver_specific_field() -> None:
    names = {f.name for f in dataclasses.fields(SolveParams)}
    assert not {n for n in names if n.startswith(("cpsat", "cbc", "highs"))}
    assert "options" in names


def test_the_registry_names_each_back_ends_options() -> None:
    """Every entry's ``options`` is the class of ``backends/options.py`` that says it belongs to that back-end."""
    module = importlib.import_module("milp_partition.backends.options")
    named = {e.name: e.options for e in BACKENDS if e.options is not None}
    assert named == {name: cls.__name__ for name, cls in OPTIONS_CLASSES.items()}
    for name, cls_name in named.items():
        assert getattr(module, cls_name).backend == name


def test_cpsat_options_given_to_cbc_are_refused() -> None:
    with pytest.raises(InputError, match="CpSatOptions are options of back-end 'cpsat', not of 'cbc'"):
        get_backend("cbc").solve(
            _model(), SolveParams(threads=1, options=CpSatOptions(parameters=(("cp_model_presolve", False),)))
        )


def test_cbc_options_given_to_cpsat_are_refused() -> None:
    with pytest.raises(InputError, match="CbcOptions are options of back-end 'cbc', not of 'cpsat'"):
        get_backend("cpsat").solve(_model(), SolveParams(threads=1, options=CbcOptions(overrun_grace_s=1.0)))


@pytest.mark.skipif(not installed("highs"), reason="highs: highspy is not installed")
def test_highs_has_no_options_and_refuses_any() -> None:
    with pytest.raises(InputError, match="not of 'highs'"):
        get_backend("highs").solve(_model(), SolveParams(threads=1, options=CpSatOptions()))


def test_a_cpsat_parameter_reaches_the_solver() -> None:
    """The parameter is in CP-SAT's own log of the run (its 'Parameters:' line), and the answer is the optimum."""
    plain = get_backend("cpsat").solve(_model(), SolveParams(threads=1))
    given = get_backend("cpsat").solve(
        _model(), SolveParams(threads=1, options=CpSatOptions(parameters=(("cp_model_presolve", False),)))
    )
    assert plain.status is given.status is SolveStatus.OPTIMAL and plain.objective == given.objective == 4
    assert "cp_model_presolve: false" in given.log and "cp_model_presolve: false" not in plain.log


def test_cbc_options_are_accepted_by_cbc() -> None:
    out = get_backend("cbc").solve(_model(), SolveParams(threads=1, options=CbcOptions(overrun_grace_s=5.0)))
    assert out.status is SolveStatus.OPTIMAL and out.objective == pytest.approx(4)


def test_options_for_picks_the_solving_back_ends_own() -> None:
    cp, cbc = CpSatOptions(parameters=(("cp_model_presolve", False),)), CbcOptions(overrun_grace_s=3.0)
    assert options_for((cp, cbc), "cpsat") is cp and options_for((cp, cbc), "cbc") is cbc
    assert options_for((cp,), "cbc") is None and options_for((), "cpsat") is None
    with pytest.raises(InputError, match="two options objects for back-end 'cpsat'"):
        options_for((cp, CpSatOptions()), "cpsat")
    with pytest.raises(InputError, match="no back-end's options"):
        options_for(("cp_model_presolve",), "cpsat")  # type: ignore[arg-type]


@pytest.mark.parametrize("solver", ["cpsat", "cbc"])
def test_the_chain_hands_each_back_end_its_own_options(solver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings that hold CP-SAT's and CBC's options: the chain passes the solving back-end its own only."""
    import milp_partition.chain as chain

    seen: list[SolveParams] = []

    class Recorder:
        name = "recorder"

        def solve(self, model: Any, params: SolveParams) -> SolveOutput:
            seen.append(params)
            return SolveOutput(SolveStatus.UNKNOWN)

    monkeypatch.setattr(chain, "get_backend", lambda name: Recorder())
    cp, cbc = CpSatOptions(parameters=(("cp_model_presolve", False),)), CbcOptions(overrun_grace_s=3.0)
    settings = ChainSettings(solver=solver, backend_options=(cp, cbc), progress_interval_s=None)
    run_backend(Result(problem="tiny", solver=solver), settings, _model())
    assert seen[0].options is {"cpsat": cp, "cbc": cbc}[solver]
