"""Galvatron's exact search against brute force: every plan of tiny random settings enumerated and scored by the
independent verifier; the solver's status, value and bound must match (a false proof is the worst bug)."""

from __future__ import annotations

import math

import pytest

from milp_partition.galvatron.dp import search
from milp_partition.galvatron.solve import GalvatronSolveSettings, solve_galvatron
from milp_partition.verifiers.galvatron import verify_galvatron
from tests.galvatron_brute_force import brute_force_seed, random_problem

SEEDS = range(40)
TOL = 1e-9


@pytest.mark.parametrize("seed", SEEDS)
def test_chain_matches_brute_force(seed: int) -> None:
    p = random_problem(seed)
    opt, _, _ = brute_force_seed(seed)
    res = solve_galvatron(p, GalvatronSolveSettings(time_limit_s=60))
    if math.isinf(opt):
        assert res.status == "infeasible", (seed, res.status, res.objective)
        return
    assert res.status == "optimal", (seed, res.status, res.message)
    assert res.objective is not None and res.objective == pytest.approx(opt, rel=TOL, abs=1e-12), (seed, res.objective, opt)
    assert res.bound is not None and res.bound <= opt * (1 + TOL) + 1e-12, (seed, res.bound, opt)
    # the search alone (no incumbent, no target passes) finds the same optimum, and its plan verifies
    got = search(p)
    assert got.plan is not None and not got.infeasible and not got.timed_out
    rep = verify_galvatron(p, got.plan)
    assert rep.feasible and rep.objective == pytest.approx(opt, rel=TOL, abs=1e-12)
    assert got.bound <= opt * (1 + TOL) + 1e-12


def test_seeds_cover_infeasible_binding_and_pipelines() -> None:
    """The random settings exercise what they must: infeasible ones, binding memory, pp > 1 optima."""
    infeasible = binding = piped = 0
    for seed in SEEDS:
        opt, plan, unlimited = brute_force_seed(seed)
        infeasible += plan is None
        piped += plan is not None and plan.pp > 1
        binding += plan is not None and unlimited < opt * (1 - 1e-12)
    assert infeasible >= 2 and binding >= 3 and piped >= 2, (infeasible, binding, piped)
