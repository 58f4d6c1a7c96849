"""The chain's typed parts: the one Budget, the stop reason, reductions with inverse data, the problem registry.

No wall-clock assertions: budgets here run on a fake clock, or are already spent.
"""

from __future__ import annotations

import json
import math
import sys
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from milp_partition.budget import Budget
from milp_partition.chain import (
    Applied,
    Bound,
    Candidate,
    ChainSettings,
    Evaluation,
    Outcome,
    Reduction,
    Run,
    StepDefaults,
    run_chain,
)
from milp_partition.result import Result, Status
from tests.source_trees import parsed


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --------------------------------------------------------------------------- Budget


def test_budget_left_deadline_share_on_a_fake_clock() -> None:
    clock = FakeClock()
    b = Budget.starting_now(10.0, clock)
    assert b.left() == 10.0 and b.deadline() == 110.0 and not b.expired()
    clock.now = 104.0
    assert b.elapsed() == 4.0 and b.left() == 6.0
    half = b.share(0.5)  # half of the whole limit, from the same start
    assert half.deadline() == 105.0 and half.left() == 1.0
    part = b.of_left(0.5)  # half of what is left, from now
    assert part.start == 104.0 and part.limit_s == 3.0 and part.deadline() == 107.0
    assert b.capped(2.0).deadline() == 106.0 and b.capped(60.0).deadline() == 110.0  # never past the whole
    assert b.share(2.0).limit_s == 10.0  # a share is never more than the whole
    clock.now = 111.0
    assert b.left() == 0.0 and b.expired() and half.expired()


def test_budget_without_a_limit_and_with_a_negative_one() -> None:
    clock = FakeClock()
    endless = Budget.starting_now(math.inf, clock)
    assert endless.deadline() == math.inf and endless.left() == math.inf
    assert endless.share(0.0).limit_s == 0.0 and endless.share(0.5).limit_s == math.inf
    assert Budget.starting_now(-3.0, clock).expired()


# --------------------------------------------------------------------------- a toy problem through the chain


@dataclass(frozen=True)
class Toy:
    """Choose one value of ``values``; the objective is the value.  ``offset`` is what a reduction removed."""

    values: tuple[float, ...]
    offset: float = 0.0


@dataclass(frozen=True)
class Shift:
    """An exact reduction: subtract the least value from all; the inverse data is that value."""

    name: str = "shift"

    def apply(self, problem: Toy) -> tuple[Toy, float]:
        low = min(problem.values)
        return Toy(tuple(v - low for v in problem.values), problem.offset + low), low

    def invert(self, solution: float, inverse_data: float) -> float:
        return solution + inverse_data

    def notes(self, reduced: Toy) -> dict[str, Any]:
        return {"values": len(reduced.values)}


@dataclass
class ToyState:
    seen: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class ToySteps(StepDefaults[Toy, float]):
    name: str = "toy"
    shift: bool = True
    stop: str | None = None
    state: ToyState = field(default_factory=ToyState)

    @property
    def formulation(self) -> None:
        return None

    def new_result(self, problem: Toy, settings: ChainSettings) -> Result:
        return Result("toy", settings.solver)

    def verify(self, problem: Toy, solution: float) -> Evaluation[float]:
        return Evaluation(solution in problem.values, solution)

    def reductions(self, run: Run[Toy, float]) -> Sequence[Reduction[Toy, float, Any]]:
        return (Shift(),) if self.shift else ()

    def bounds(self, run: Run[Toy, float]) -> Iterable[Bound]:
        return [Bound(min(run.problem.values), "least value")]

    def heuristics(self, run: Run[Toy, float]) -> Iterable[Outcome[float]]:
        # the largest value of the reduced problem: lifted back, a value of the original one
        self.state.seen.append(max(run.work.values))
        yield Outcome("largest", max(run.work.values), stopped_by=self.stop)  # type: ignore[arg-type]

    def refine(self, run: Run[Toy, float]) -> Iterable[Outcome[float]]:
        yield Outcome("smallest", min(run.work.values))

    def record(self, result: Result, problem: Toy, best: Candidate[float]) -> None:
        result.assignment = {"value": str(best.solution)}


def test_reduction_inverse_data_lifts_solutions_back() -> None:
    problem = Toy((5.0, 7.0, 9.0))
    reduced, low = Shift().apply(problem)
    assert reduced.values == (0.0, 2.0, 4.0) and low == 5.0
    assert Shift().invert(4.0, low) == 9.0
    run: Run[Toy, float] = Run(problem, reduced, ChainSettings(), Result("toy", "none"), Budget.starting_now(1.0))
    run.applied.append(Applied(Shift(), low))
    run.applied.append(Applied(Shift(), 1.5))  # a second reduction: inverted first
    assert run.lift(0.5) == 7.0


def test_chain_applies_reductions_and_verifies_lifted_solutions() -> None:
    steps = ToySteps()
    result = run_chain(steps, Toy((5.0, 7.0, 9.0)), ChainSettings(solver="none", time_limit_s=10.0))
    assert steps.state.seen == [4.0]  # the heuristic saw the reduced problem
    assert result.solver_notes["shift"]["values"] == 3
    assert [h.objective for h in result.heuristics] == [9.0, 5.0]  # lifted and verified on the original
    assert result.status is Status.OPTIMAL and result.objective == 5.0 and result.stopped_by is None


def test_an_already_spent_budget_stops_with_time_limit() -> None:
    """A budget with no time left: the chain settles on what it has, and says the time limit stopped it."""
    spent = Budget(0.0, 0.0, FakeClock(50.0))

    @dataclass(frozen=True)
    class NoProof(ToySteps):
        def bounds(self, run: Run[Toy, float]) -> Iterable[Bound]:
            return ()

    result = run_chain(NoProof(), Toy((1.0, 2.0)), ChainSettings(solver="none", time_limit_s=0.0), spent)
    assert result.status is Status.FEASIBLE and result.stopped_by == "time_limit"
    assert result.message.endswith("; time limit reached")
    assert json.loads(json.dumps(result.to_json_dict()))["stopped_by"] == "time_limit"


def test_an_interrupted_method_stops_the_chain_through_its_outcome() -> None:
    """A method that says it was interrupted: its outcome counts, nothing after it runs, the result says so."""
    result = run_chain(ToySteps(stop="interrupt"), Toy((5.0, 7.0)), ChainSettings(solver="none", time_limit_s=10.0))
    assert result.stopped_by == "interrupt" and "interrupted" not in result.solver_notes
    assert [h.name for h in result.heuristics] == ["largest"]  # the refinement did not run
    assert result.message.startswith("interrupted; the best verified solution found before it")
    assert "time limit" not in result.message


def test_proven_answers_carry_no_time_limit_even_on_a_spent_budget() -> None:
    spent = Budget(0.0, 0.0, FakeClock(50.0))
    result = run_chain(ToySteps(), Toy((1.0, 2.0)), ChainSettings(solver="none", time_limit_s=0.0), spent)
    assert result.status is Status.OPTIMAL and result.stopped_by is None and "time limit" not in result.message


def test_joint_search_on_a_spent_budget_stops_with_time_limit() -> None:
    """The joint DP under a spent budget returns at once: the baseline's plan, feasible, stopped by the time limit."""
    from test_joint_io import tiny

    from milp_partition.io.piper import joint_from_dict
    from milp_partition.joint.problem import JointSolveSettings
    from milp_partition.joint.solve import JointSteps

    problem = joint_from_dict(tiny(), "tiny")
    settings = JointSolveSettings(time_limit_s=600.0, baselines=False)  # the budget, not the setting, is spent
    spent = Budget(600.0, 0.0, FakeClock(1000.0))
    result = run_chain(JointSteps(settings), problem, ChainSettings(solver="cpsat", time_limit_s=600.0), spent)
    assert result.status is Status.FEASIBLE and result.stopped_by == "time_limit"
    assert result.solver_notes["timed_out"] is True and "time limit" in result.message


# --------------------------------------------------------------------------- the registry


def test_registry_names_every_problem_and_its_modules() -> None:
    from milp_partition import registry

    assert list(registry.PROBLEMS) == ["placement", "strategy", "joint", "galvatron", "hetero", "pipeline"]  # detection order
    for entry in registry.PROBLEMS.values():
        assert callable(entry.solve_function()) and callable(entry.verifier_function()) and callable(entry.reader)
        if entry.gap is not None:
            assert hasattr(entry.gap_module(), "recognize")
        assert entry.options_module().OPTIONS is not None and callable(entry.options_module().register_options)
    assert registry.problem("joint").solve_function().__name__ == "solve_joint"
    from milp_partition.errors import InputError

    with pytest.raises(InputError):
        registry.problem("nope")


def test_importing_the_registry_imports_no_problem_module() -> None:
    import subprocess

    code = (
        "import sys, milp_partition.registry; "
        "print(sorted(m for m in sys.modules if m.startswith('milp_partition.') and m.count('.') > 1))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "solve" not in out and "cli" not in out and "gap" not in out and "plots" not in out, out


@pytest.fixture
def fake_problem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A problem added with one registry line; its modules live in ``sys.modules``."""
    from milp_partition import registry

    cli = types.ModuleType("fake_problem_cli")
    cli.OPTIONS = frozenset()  # type: ignore[attr-defined]
    cli.claims = lambda data: isinstance(data, dict) and data.get("format") == "fake/1"  # type: ignore[attr-defined]
    cli.register_options = lambda parser, command: None  # type: ignore[attr-defined]
    cli.problem_from_args = lambda args: "fake"  # type: ignore[attr-defined]
    cli.cmd_solve = lambda args: 42  # type: ignore[attr-defined]
    cli.cmd_evaluate = lambda args: 43  # type: ignore[attr-defined]
    cli.cmd_info = lambda args: 44  # type: ignore[attr-defined]
    gap = types.ModuleType("fake_problem_gap")
    gap.HEURISTICS = ("h",)  # type: ignore[attr-defined]
    gap.AXES = {}  # type: ignore[attr-defined]
    gap.OBJECTIVE = "value"  # type: ignore[attr-defined]
    gap.recognize = lambda path: None if path.suffix == ".fake" else "not fake"  # type: ignore[attr-defined]
    plot = types.ModuleType("fake_problem_plot")
    plot.figure = lambda result, instance, options: "figure"  # type: ignore[attr-defined]
    solve = types.ModuleType("fake_problem_solve")
    solve.solve_fake = lambda problem, settings: "solved"  # type: ignore[attr-defined]
    solve.verify_fake = lambda problem, solution: "verified"  # type: ignore[attr-defined]
    for m in (cli, gap, plot, solve):
        monkeypatch.setitem(sys.modules, m.__name__, m)
    # the one line a new problem adds (first: the pipeline fallback stays last)
    entry = registry.ProblemEntry(
        "fake",
        "fake_problem_cli",
        "fake_problem_solve:solve_fake",
        "fake_problem_solve:verify_fake",
        "fake_problem_gap",
        "fake_problem_plot",
    )
    monkeypatch.setattr(registry, "PROBLEMS", {"fake": entry, **registry.PROBLEMS})
    path = tmp_path / "x.fake"
    path.write_text(json.dumps({"format": "fake/1"}))
    return path


def test_a_problem_added_with_one_line_is_found_by_solve_gap_and_plot(fake_problem: Path) -> None:
    import argparse

    from milp_partition.cli import dispatch, problem_commands
    from milp_partition.registry import problem
    from milp_partition.sweep.registry import gap_module, gap_problems

    # solve: detected from the file, dispatched to its command
    assert problem_commands.problem_kind(argparse.Namespace(problem=None, instance=fake_problem)) == "fake"
    assert dispatch.main(["solve", str(fake_problem)]) == 42
    assert dispatch.main(["info", str(fake_problem)]) == 44
    assert problem("fake").solve_function()(None, None) == "solved"
    # gap
    assert "fake" in gap_problems() and gap_module("fake").recognize(fake_problem) is None
    from milp_partition.cli.gap import _problem_of

    assert _problem_of(fake_problem, "auto")[0] == "fake"
    # plot
    assert problem("fake").plot_module().figure({}, None, {}) == "figure"


def test_only_the_top_layer_imports_the_registry() -> None:
    """The registry names every problem's solve module: only cli/, plots/, sweep/ and run/ may import it."""
    import ast

    root = Path(__file__).resolve().parent.parent / "milp_partition"
    top = {"cli", "plots", "sweep", "run"}
    offenders = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] in top or (rel.name == "registry.py" and len(rel.parts) == 1):
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if "milp_partition.registry" in names:
                offenders.append(str(rel))
    assert not offenders, offenders
