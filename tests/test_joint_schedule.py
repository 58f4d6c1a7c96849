"""The joint search's declared schedule (issue 41, item 5): each phase's seconds as the fractions it replaced gave them.

The fractions were spread over ``JointSolveSettings``' docstring and six fields (a quarter, a sixth, a twentieth, a
third and two thirds of the bounds' quarter, four fifths or nine tenths of what is left); the schedule states them in
one value.  Here, under budgets with a fake clock (no wall-clock time), every phase gets what the old arithmetic gave,
and the joint steps take their phases' seconds from the schedule they are given.
"""

from __future__ import annotations

import pytest

from milp_partition.budget import Budget
from milp_partition.joint.problem import JointSolveSettings
from milp_partition.joint.schedule import JointSchedule, Phase


def _budget(limit_s: float, elapsed_s: float) -> Budget:
    now = [0.0]
    budget = Budget.starting_now(limit_s, clock=lambda: now[0])
    now[0] = elapsed_s
    return budget


@pytest.mark.parametrize("limit_s", [1.0, 7.5, 20.0, 60.0, 120.0, 600.0, 3600.0])
@pytest.mark.parametrize("elapsed_fraction", [0.0, 0.3, 0.9])
def test_each_phase_gets_what_the_old_fractions_gave(limit_s: float, elapsed_fraction: float) -> None:
    s = JointSchedule()
    budget = _budget(limit_s, elapsed_fraction * limit_s)
    left = budget.left()
    bounds = min(15.0, limit_s / 4)  # the old bound_time_limit_s = 15, at most a quarter of the limit
    old = {
        "piper_style": min(2.0, limit_s / 4),
        "orders_below_cap": min(20.0, limit_s / 20),
        "orders": min(20.0, limit_s / 6),
        "polish": min(10.0, limit_s / 6),
        "segment_bound": bounds / 3,
        "stage_bound": 2 * bounds / 3,
        "column_bound": min(600.0, 0.8 * left),
    }
    for name, seconds in old.items():
        assert getattr(s, name).seconds(budget) == pytest.approx(seconds, rel=1e-12), name
    assert s.bounds_seconds(budget) == pytest.approx(bounds, rel=1e-12)
    assert s.column_bound.seconds(budget, s.column_bound_last_share) == pytest.approx(min(600.0, 0.9 * left), rel=1e-12)
    assert s.column_bound.share * left == pytest.approx(0.8 * left, rel=1e-12)  # where the column bound gives up


def test_capped_turns_phases_off_and_refuses_unknown_names() -> None:
    s = JointSchedule().capped(polish=0, orders=1.0)
    assert not s.polish.runs and s.orders.runs and s.orders.seconds(_budget(600.0, 0.0)) == 1.0
    assert s.orders.share == JointSchedule().orders.share  # only the cap changed
    with pytest.raises(ValueError, match="no phase bound_time_limit_s"):
        JointSchedule().capped(bound_time_limit_s=0)
    with pytest.raises(ValueError, match="share"):
        Phase(1.0, 1.5)
    with pytest.raises(ValueError, match="cap"):
        Phase(float("nan"), 0.5)


def test_the_result_states_the_schedule_it_ran_under() -> None:
    from milp_partition.joint.generators import parallel_branches
    from milp_partition.joint.solve import solve_joint

    schedule = JointSchedule().capped(piper_style=0.5)
    problem = parallel_branches(2, 2, 2, 2**30, seed=0)
    result = solve_joint(problem, JointSolveSettings(time_limit_s=30.0, solver="none", schedule=schedule))
    assert result.status.value == "optimal"
    stated = result.settings["schedule"]
    assert stated["piper_style"] == {"cap_s": 0.5, "share": 0.25, "of": "limit"}
    assert stated["column_bound"]["of"] == "left" and stated["column_bound_last_share"] == 0.9


def test_the_steps_take_the_orders_and_polish_seconds_from_the_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the DP's cap, the orders' DP and the polisher get their phases' seconds (the caps here: a sixth of a 600 s
    limit is more), and a phase with a cap of 0 does not run."""
    from milp_partition.joint import solve as solve_module
    from milp_partition.joint.generators import parallel_branches

    asked: dict[str, float] = {}
    real_orders, real_polish = solve_module.grouped_order_dp, solve_module.polish_starts

    def orders(problem, budget, groups, found=None):  # type: ignore[no-untyped-def]
        asked.setdefault("orders", budget.limit_s)
        return real_orders(problem, budget, groups, found=found)

    def polish(problem, starts, budget, seed=0):  # type: ignore[no-untyped-def]
        asked.setdefault("polish", budget.limit_s)
        return real_polish(problem, starts, budget, seed)

    monkeypatch.setattr(solve_module, "grouped_order_dp", orders)
    monkeypatch.setattr(solve_module, "polish_starts", polish)
    problem = parallel_branches(3, 3, 4, 2**30, seed=1)
    no_bounds = dict(segment_bound=0, stage_bound=0, column_bound=0)
    schedule = JointSchedule().capped(orders=0.75, polish=0.5, **no_bounds)
    settings = JointSolveSettings(time_limit_s=600.0, max_ideals=10, solver="none", threads=1, schedule=schedule)
    solve_module.solve_joint(problem, settings)
    assert (asked["orders"], asked["polish"]) == (0.75, 0.5)  # (a 600 s limit leaves far more)
    asked.clear()
    off = JointSolveSettings(time_limit_s=600.0, max_ideals=10, solver="none", threads=1, schedule=schedule.capped(polish=0))
    solve_module.solve_joint(problem, off)
    assert "orders" in asked and "polish" not in asked
