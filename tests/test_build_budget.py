"""The model build reads the time limit: a formulation of hundreds of thousands of rows (4 s in Python on a
4,000-task placement with link contention) was built past the limit only for the translation to drop it.  Fake
clocks only: nothing here depends on how fast the machine is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from milp_partition import chain
from milp_partition.backends import model as model_module
from milp_partition.backends.model import TICK_ROWS, Model, Sense, VarKind, build_budget
from milp_partition.budget import Budget
from milp_partition.placement.problem import make_placement_problem
from milp_partition.placement.solve import PlacementSolveSettings, solve_placement


def _spent() -> Budget:
    return Budget(1.0, 0.0, lambda: 5.0)  # started at 0 s, read at 5 s: spent


def test_rows_read_the_build_budget_every_tick() -> None:
    """Under a spent budget the row that completes a tick raises; without one, or with time left, nothing does."""
    m = Model()
    x = m.add_var("x", VarKind.CONTINUOUS, 0.0, 1.0)
    with build_budget(_spent()):
        for _ in range(TICK_ROWS - 1):
            m.add_constraint([(x, 1.0)], Sense.LE, 1.0)
        with pytest.raises(TimeoutError, match="while the model was built"):
            m.add_constraint([(x, 1.0)], Sense.LE, 1.0)
    for _ in range(2 * TICK_ROWS):  # outside the block: no budget
        m.add_constraint([(x, 1.0)], Sense.LE, 1.0)
    with build_budget(Budget(1.0, 0.0, lambda: 0.5)):  # time left
        for _ in range(TICK_ROWS):
            m.add_constraint([(x, 1.0)], Sense.LE, 1.0)


def test_a_build_past_the_limit_ends_the_exact_phase_with_the_verified_plan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chain builds under the budget: a build that runs out stops the exact phase (time limit), says so, and the
    answer is the heuristics' verified plan with the chain's bounds (no exception, no exact solve)."""
    rng = np.random.default_rng(3)
    n, d = 6, 2
    time = rng.integers(1, 6, size=(n, d)).astype(float)
    edges = [(str(i), str(i + 1)) for i in range(n - 1)]
    comm = np.ones((len(edges), d, d))
    comm[:, 0, 0] = comm[:, 1, 1] = 0.0  # no transfer within a device
    problem = make_placement_problem([str(i) for i in range(n)], ["g0", "g1"], time, np.zeros(n), [np.inf, np.inf], edges, comm)

    @contextmanager
    def spent_build(_budget: Budget | None) -> Iterator[None]:
        with build_budget(_spent()):
            yield

    monkeypatch.setattr(model_module, "TICK_ROWS", 1)  # every row reads the clock
    monkeypatch.setattr(chain, "build_budget", spent_build)
    result = solve_placement(problem, PlacementSolveSettings(time_limit_s=30.0, decompose=False, progress_interval_s=5.0))
    assert "the time limit ran out while the model was built" in capsys.readouterr().err
    assert result.stopped_by == "time_limit" and result.status in ("feasible", "optimal")
    assert result.objective is not None and result.bound is not None and result.bound <= result.objective
