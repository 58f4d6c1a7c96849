"""Back-ends replay small programs with known optima; scaling keeps bounds proven."""

from __future__ import annotations

import io
import itertools
import math

import pytest

from milp_partition.backends import Model, Sense, SolveParams, SolveStatus, VarKind, get_backend, model_solvers
from milp_partition.backends.base import ProgressPrinter, relative_gap
from milp_partition.backends.registry import installed
from milp_partition.backends.scaling import scale_model
from milp_partition.errors import InputError, ModelError

#: Every back-end that solves a model (the registry's), each skipped with its reason where its package is missing.
BACKENDS = [
    pytest.param(name, marks=pytest.mark.skipif(not installed(name), reason=f"{name}: its package is not installed"))
    for name in model_solvers()
]


def _knapsack_minmax(weights: list[float], bins: int) -> tuple[Model, float]:
    """Min makespan of items on identical bins, with its brute-force optimum."""
    m = Model("minmax")
    x = {(i, b): m.add_var(f"x{i}{b}") for i in range(len(weights)) for b in range(bins)}
    t = m.add_var("T", VarKind.CONTINUOUS, 0, sum(weights))
    for i in range(len(weights)):
        m.add_constraint([(x[i, b], 1) for b in range(bins)], Sense.EQ, 1)
    for b in range(bins):
        m.add_constraint([*((x[i, b], w) for i, w in enumerate(weights)), (t, -1)], Sense.LE, 0)
    m.minimize([(t, 1)])
    best = min(
        max(sum(w for w, a in zip(weights, assign) if a == b) for b in range(bins))
        for assign in itertools.product(range(bins), repeat=len(weights))
    )
    return m, best


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("weights", [[3.0, 1.0, 2.0, 2.0], [0.125, 0.7, 1.3, 0.45, 0.9], [1 / 3, 2 / 7, 5 / 11, 0.1]])
def test_known_optimum(backend: str, weights: list[float]) -> None:
    model, best = _knapsack_minmax(weights, 2)
    out = get_backend(backend).solve(model, SolveParams(threads=1))
    assert out.status is SolveStatus.OPTIMAL
    assert out.values is not None
    assignment_max = max(sum(w for i, w in enumerate(weights) if out.values[i * 2 + b] > 0.5) for b in range(2))
    assert assignment_max == pytest.approx(best, rel=1e-9)
    assert out.bound <= best + 1e-12
    assert out.bound >= best - 1e-6


@pytest.mark.parametrize("backend", BACKENDS)
def test_infeasible(backend: str) -> None:
    m = Model()
    x, y = m.add_var("x"), m.add_var("y")
    m.add_constraint([(x, 1), (y, 1)], Sense.GE, 3)
    m.minimize([(x, 1)])
    out = get_backend(backend).solve(m, SolveParams(threads=1))
    assert out.status is SolveStatus.INFEASIBLE
    assert out.values is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_hint_is_used(backend: str) -> None:
    model, best = _knapsack_minmax([5.0, 4.0, 3.0, 3.0, 3.0, 2.0], 2)
    assert best == 10  # {5,3,2} / {4,3,3}
    # hint a worse split, {5,4} / {3,3,3,2}: 9 vs 11 -> 11
    opt = [0, 0, 1, 1, 1, 1]
    for i, b in enumerate(opt):
        for bb in range(2):
            model.set_hint(model.variables[i * 2 + bb], 1.0 if b == bb else 0.0)
    model.set_hint(model.variables[-1], 11.0)
    out = get_backend(backend).solve(model, SolveParams(threads=1))
    assert out.status is SolveStatus.OPTIMAL
    assert out.objective == pytest.approx(best, rel=1e-6)
    if backend == "cpsat":
        assert out.first_incumbent is not None and out.first_incumbent <= 11.0 + 1e-9
        assert "hint" in out.log.lower()
    elif backend == "highs":
        assert out.notes["hinted_variables"] == 13
    else:
        assert "mipstart" in out.notes


def test_scaling_is_exact_for_decimal_data() -> None:
    model, _ = _knapsack_minmax([0.125, 0.7, 1.3], 2)
    scaled = scale_model(model, 2.0**40)
    assert scaled.exact and scaled.max_error == 0.0
    assert scaled.scale == 1000.0  # 0.125 needs three decimals


def test_scaling_records_rounding_and_keeps_the_bound_proven() -> None:
    weights = [1 / 3, 2 / 7, 5 / 11, 1 / 13]
    model, best = _knapsack_minmax(weights, 2)
    scaled = scale_model(model, 2.0**40)
    assert not scaled.exact and 0 < scaled.max_error < 1e-8
    out = get_backend("cpsat").solve(model, SolveParams(threads=1))
    assert out.bound <= best  # conservative despite rounding


def test_continuous_variable_needs_integral_coefficient() -> None:
    m = Model()
    t = m.add_var("T", VarKind.CONTINUOUS, 0, 1)
    m.add_constraint([(t, 0.5)], Sense.LE, 1)
    with pytest.raises(ModelError):
        scale_model(m, 2.0**40)


def test_model_rejects_bad_bounds_and_nan() -> None:
    m = Model()
    with pytest.raises(ModelError):
        m.add_var("v", VarKind.INTEGER, 3, 1)
    v = m.add_var("v", VarKind.INTEGER, 0, 3)
    with pytest.raises(ModelError):
        m.add_constraint([(v, math.nan)], Sense.LE, 1)


def test_unknown_backend_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="unknown solver"):
        get_backend("gurobi")


def test_progress_printer_prints_incumbent_bound_gap() -> None:
    import threading

    class Stream(io.StringIO):  # a stream that says when the printer has written (no sleeping on the clock)
        written = threading.Event()

        def write(self, s: str) -> int:
            n = super().write(s)
            self.written.set()
            return n

    buf = Stream()
    p = ProgressPrinter("x", 0.01, stream=buf)
    p.update(incumbent=10.0, bound=8.0)
    with p:
        assert buf.written.wait(timeout=120)
    text = buf.getvalue()
    assert "incumbent 10" in text and "bound 8" in text and "gap 20.00%" in text
    assert relative_gap(10.0, 8.0) == pytest.approx(0.2)


def test_cbc_watchdog_interrupts_a_child_named_cbc(tmp_path) -> None:
    """CBC ignores its time limit inside a long LP; the watchdog sends SIGINT to a child process named cbc."""
    import os
    import shutil
    import signal
    import subprocess
    import threading

    from milp_partition.backends import cbc

    sleep = shutil.which("sleep")
    if sleep is None or not os.path.isdir("/proc"):
        pytest.skip("needs sleep and /proc")
    fake = tmp_path / "cbc"
    fake.symlink_to(sleep)
    child = subprocess.Popen([str(fake), "600"])
    try:
        assert child.pid in cbc._cbc_children()
        stop, stopped = threading.Event(), []
        worker = threading.Thread(target=cbc._watchdog, args=(0.2, 5.0, stop, stopped))
        worker.start()
        child.wait(timeout=120)  # only a guard against a hang: the exit status below says who ended it
        stop.set()
        worker.join(timeout=120)
        # ended by the watchdog's SIGINT: not by itself (0, after 600 s), not by the SIGKILL that follows a failed interrupt
        assert child.returncode == -signal.SIGINT, child.returncode
        assert stopped and "interrupted" in stopped[0]
    finally:
        if child.poll() is None:
            child.kill()


def test_a_continuous_variable_with_a_coefficient_other_than_one_is_refused() -> None:
    # 4 T >= 7 has the real optimum T = 1.75; on the grid of s = 10 the integer model's optimum is 1.8, a false bound
    m = Model()
    t = m.add_var("T", VarKind.CONTINUOUS, 0.0, 10.0)
    x = m.add_var("x")
    m.add_constraint([(t, 4.0), (x, -7.0)], Sense.GE, 0.0, "time")
    m.add_constraint([(x, 1.0)], Sense.GE, 1.0, "x")
    m.minimize([(t, 1.0)])
    with pytest.raises(ModelError, match=r"\+1 or -1"):
        scale_model(m, 2.0**53)
    out = get_backend("cbc").solve(m, SolveParams(time_limit_s=30.0))
    assert out.status is SolveStatus.OPTIMAL and out.objective == pytest.approx(1.75)


def test_the_registry_derives_the_solver_choices() -> None:
    from milp_partition.backends import Capability, has, solver_choices, with_capability
    from milp_partition.cli.options import add_solver_options

    assert solver_choices() == (*model_solvers(), "none") and model_solvers()[:2] == ("cpsat", "cbc")
    assert "highs" in model_solvers() and "glop" not in model_solvers()  # GLOP: LPs of the bound passes only
    assert with_capability(Capability.CP) == ("cpsat",) and has("highs", Capability.LP) and not has("none", Capability.MILP)
    import argparse

    parser = argparse.ArgumentParser()
    add_solver_options(parser)
    (action,) = [a for a in parser._actions if a.dest == "solver"]
    assert tuple(action.choices) == solver_choices()
    with pytest.raises(InputError, match="bound passes only"):
        get_backend("glop")


@pytest.mark.skipif(installed("highs"), reason="highspy is installed here: nothing to refuse")
def test_a_backend_not_installed_names_its_extra() -> None:
    from milp_partition.errors import SolverUnavailableError

    with pytest.raises(SolverUnavailableError, match=r"milp-partition\[highs\]"):
        get_backend("highs")


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b.values[0] != "cpsat"])  # CP-SAT: +-1 on continuous
def test_mixed_integer_with_fractional_optimum(backend: str) -> None:
    """min 3x + 2y + 0.37t, x + y >= 1.5 (x, y integer), t >= 0.25 - x/8 (t continuous): optimum 4.0925 at x=0, y=2."""
    m = Model()
    x, y = m.add_var("x", VarKind.INTEGER, 0, 5), m.add_var("y", VarKind.INTEGER, 0, 5)
    t = m.add_var("t", VarKind.CONTINUOUS, 0, 10)
    m.add_constraint([(x, 1), (y, 1)], Sense.GE, 1.5)
    m.add_constraint([(t, 1), (x, 0.125)], Sense.GE, 0.25)
    m.minimize([(x, 3), (y, 2), (t, 0.37)])
    best = min(3 * a + 2 * b + 0.37 * max(0.0, 0.25 - a / 8) for a in range(6) for b in range(6) if a + b >= 1.5)
    out = get_backend(backend).solve(m, SolveParams(threads=1))
    assert out.status is SolveStatus.OPTIMAL
    assert out.objective == pytest.approx(best, rel=1e-9)
    assert best - 1e-6 <= out.bound <= best + 1e-12


@pytest.mark.skipif(not installed("highs"), reason="highspy is not installed")
def test_highs_ctrl_c_cancels_the_solve_and_proves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while HiGHS solves (the first wait of the solve raises KeyboardInterrupt, as a signal would): the solve is
    cancelled and returns; whatever it has is no proof (capability CANCEL)."""
    import random

    from milp_partition.backends import highs as highs_backend

    real = highs_backend._new_highs

    def interrupted_on_first_wait(highspy):  # type: ignore[no-untyped-def]
        h = real(highspy)
        wait, calls = h.wait, []

        def first_raises(timeout: float = -1.0):  # type: ignore[no-untyped-def]
            calls.append(timeout)
            if len(calls) == 1:
                raise KeyboardInterrupt
            return wait(timeout)

        h.wait = first_raises
        return h

    monkeypatch.setattr(highs_backend, "_new_highs", interrupted_on_first_wait)
    rng = random.Random(3)
    m = Model("many bins")
    weights = [rng.randint(100, 999) / 7 for _ in range(30)]
    x = {(i, b): m.add_var(f"x{i}_{b}") for i in range(30) for b in range(6)}
    t = m.add_var("T", VarKind.CONTINUOUS, 0, sum(weights))
    for i in range(30):
        m.add_constraint([(x[i, b], 1) for b in range(6)], Sense.EQ, 1)
    for b in range(6):
        m.add_constraint([*((x[i, b], w) for i, w in enumerate(weights)), (t, -1)], Sense.LE, 0)
    m.minimize([(t, 1)])
    out = get_backend("highs").solve(m, SolveParams(time_limit_s=600, threads=1))
    assert out.notes.get("interrupted") is True
    assert out.status in (SolveStatus.FEASIBLE, SolveStatus.UNKNOWN)  # never OPTIMAL after an interrupt
    assert "interrupt" in str(out.notes["highs_status"]).lower()  # HiGHS itself stopped on the cancel
    if out.values is not None:  # an incumbent is kept: a real assignment, T at least its largest load
        loads = [sum(w for i, w in enumerate(weights) if out.values[6 * i + b] > 0.5) for b in range(6)]
        assert out.objective >= max(loads) * (1 - 1e-9)


@pytest.mark.skipif(not installed("highs"), reason="highspy is not installed")
def test_solve_with_highs_from_the_command_line(shared_benchmarks, capsys) -> None:
    """--solver highs reaches the placement chain (its linear disjunctive model: HiGHS has no CP capability) and proves
    example-1's known optimum, 30; an LP-only engine is not a --solver choice."""
    from milp_partition.cli.dispatch import main

    instance = str(shared_benchmarks / "placement" / "example-1.json")
    assert main(["solve", instance, "--solver", "highs", "--time-limit", "60", "--threads", "1", "-q"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("optimal objective=30 ")
    with pytest.raises(SystemExit) as refused:  # argparse's choice error: one line, exit 2
        main(["solve", instance, "--solver", "glop", "-q"])
    assert (
        refused.value.code == 2
        and "invalid choice: 'glop' (choose from 'cpsat', 'cbc', 'highs', 'none')" in capsys.readouterr().err
    )
