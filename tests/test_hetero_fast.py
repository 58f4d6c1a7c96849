"""Issue 40, the hetero search's speed work: the vectorised bounds against their exact scalar forms."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from milp_partition.budget import Budget
from milp_partition.hetero.search import _Search, _Tables, set_allreduce_lb
from milp_partition.io.sailor import read_sailor

HETERO = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hetero"
pytestmark = pytest.mark.skipif(not HETERO.is_dir(), reason="../shared/benchmarks/hetero is not here")


@pytest.mark.parametrize("setting", ["opt350-a8-v16", "gptneo-a32-v96"])
def test_vectorised_allreduce_bound_is_below_the_exact_one_and_close(setting: str) -> None:
    """:func:`set_allreduce_lb` (every reduced set, every layer range at once, in numpy) is a lower bound on
    :meth:`_Search.ar_lb` (the exact bucket loop) everywhere, within 1e-8 of it, and 0 for D = 1 (it can fail: a
    bound above the exact value would prune a better plan)."""
    problem = read_sailor(HETERO, setting=setting)
    srch = _Search(problem, Budget.starting_now(60.0), math.inf, None)
    tb = _Tables(problem, problem.micro_batches()[0])
    per_col = [[k for k, (j, _t) in enumerate(tb.cfgs) if j == jj] for jj in range(len(tb.cols))]
    sets = [tuple(k for k in ch if k is not None) for ch in itertools.product(*[[None, *ks] for ks in per_col])]
    sets = [q for q in sets if q]
    assert not set_allreduce_lb(srch, tb, sets, 1).any()
    for d in (2, 7, 16):
        got = set_allreduce_lb(srch, tb, sets, d)
        for qi, q in enumerate(sets):
            for s in range(tb.L):
                for e in range(s + 1, tb.L + 1):
                    exact = srch.ar_lb(tb, q, s, e, d)
                    assert got[qi, s, e] <= exact, (q, s, e, d)
                    assert got[qi, s, e] >= exact - 1e-8 * abs(exact) - 1e-15, (q, s, e, d)  # a fit can go negative
        assert np.isfinite(got).all()


def test_two_column_oracle_answers_as_the_assignment_program() -> None:
    """The even heuristic's feasibility table (:class:`_TwoColumnOracle`: one program per theta for every d) says
    feasible exactly when :func:`_assign` (a program per theta and d) finds an assignment, on random stage options of
    two columns (every tp, compute values with ties, tight and loose caps)."""
    from milp_partition.heuristics.hetero_even import _assign, _TwoColumnOracle

    rng = np.random.default_rng(5)
    for _ in range(300):
        p = int(rng.integers(1, 6))
        options = []
        for _i in range(p):
            row = []
            for idx in range(int(rng.integers(1, 6))):
                row.append((float(rng.integers(1, 8)), int(rng.integers(0, 2)), int(rng.choice([1, 2, 4])), idx))
            options.append(row)
        caps = [int(rng.integers(0, 40)), int(rng.integers(0, 40))]
        values = sorted({o[0] for r in options for o in r})
        oracle = _TwoColumnOracle(options)
        for d in range(1, 12):
            got = [oracle.feasible(caps, theta, d) for theta in values]
            want = [_assign(options, caps, theta, d) is not None for theta in values]
            assert got == want, (options, caps, d)


def test_the_heuristics_compute_floor_skips_no_better_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The even and uniform heuristics price a plan only when its compute floor is below the best so far: on every
    shared setting (both objectives) they return the very plans and seconds of pricing every plan (the floor turned
    off), and the floor is at most the price of every plan they list.  A floor 10 % too high changes the answer on some
    setting (so the comparison can fail)."""
    from milp_partition.heuristics import hetero_even

    from milp_partition.hetero.cost import evaluate
    from milp_partition.io.sailor import setting_names

    floor = hetero_even.compute_floor
    problems = [read_sailor(HETERO, setting=n, objective=o) for n in setting_names(HETERO) for o in ("sailor", "sound")]
    with_floor = [(hetero_even.best_even_plan(p), hetero_even.best_uniform_plan(p)) for p in problems]
    for p in problems:
        for plan in itertools.islice(hetero_even.uniform_plans(p), 40):
            r = plan.replicas[0][0]
            t = p.model.times[(r.kind, plan.mbs, r.tp)]
            m = math.ceil(p.global_batch / (plan.mbs * len(plan.replicas[0])))
            c = [sum(t[ly][0] + t[ly][1] for ly in range(s, e)) for s, e in plan.stages]
            assert floor(m, c) <= evaluate(p, plan).iteration_s
    monkeypatch.setattr(hetero_even, "compute_floor", lambda m, c: -math.inf)
    assert [(hetero_even.best_even_plan(p), hetero_even.best_uniform_plan(p)) for p in problems] == with_floor
    monkeypatch.setattr(hetero_even, "compute_floor", lambda m, c: 1.1 * floor(m, c))
    assert [(hetero_even.best_even_plan(p), hetero_even.best_uniform_plan(p)) for p in problems] != with_floor


def test_one_column_greedy_is_monotone_so_the_pointer_finds_the_bisection_index() -> None:
    """On one column the even heuristic moves one pointer over theta as D grows (:func:`best_even_plan`) instead of a
    bisection per D: that finds the same least feasible theta only because :func:`_assign` on one column is feasible
    exactly when the stages' least allowed tps fit (sum_i d tp_i(theta) <= the count), monotone in theta and in d.
    Checked on random stage options of one column: feasibility by _assign equals that sum test and the one-column
    oracle's, for every theta and d, and every d that fits gets the same assignment (the oracle keeps one per theta)."""
    from milp_partition.heuristics.hetero_even import _assign, _OneColumnOracle

    rng = np.random.default_rng(9)
    for _ in range(300):
        p = int(rng.integers(1, 6))
        options = [
            [(float(rng.integers(1, 8)), 0, int(rng.choice([1, 2, 4])), idx) for idx in range(int(rng.integers(1, 5)))]
            for _i in range(p)
        ]
        cap = int(rng.integers(0, 60))
        values = sorted({o[0] for r in options for o in r})
        oracle = _OneColumnOracle(options, values)
        for k, theta in enumerate(values):
            choices = set()
            for d in range(1, 12):
                least = [min((tp for comp, _c, tp, _i in row if comp <= theta), default=None) for row in options]
                fits = all(t is not None for t in least) and sum(d * t for t in least if t is not None) <= cap
                got = _assign(options, [cap], theta, d)
                assert (got is not None) == fits == oracle.feasible([cap], k, d), (options, cap, d, theta)
                if got is not None:
                    choices.add(tuple(got))
            assert len(choices) <= 1
