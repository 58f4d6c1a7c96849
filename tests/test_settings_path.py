"""One settings path (issue 41, item 1): every common flag of ``solve`` reaches each problem's search, or is refused.

The registry builds one :class:`~milp_partition.settings.CommonSettings` from the flags
(:meth:`~milp_partition.registry.ProblemEntry.common_settings`); each problem's settings derive from it and the
chain reads their common part.  Here, for every problem and every common flag, the value given on the command line
is the one found in the settings the problem's steps and the chain receive (the chain is stopped right there), or the
command exits 2 naming the problem and the flag.  Two end-to-end checks follow the values further: into the back-end
(joint's slot model on CBC) and into Galvatron's exact search (its first incumbent).
"""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from test_joint_io import tiny

from milp_partition import registry
from milp_partition.backends import SolveOutput, SolveParams, SolveStatus
from milp_partition.cli import main
from milp_partition.settings import CommonSettings
from tests.source_trees import parsed

REPO = Path(__file__).resolve().parents[1]
GALVATRON = REPO.parent / "shared" / "benchmarks" / "galvatron"


def _instance(problem: str, tmp_path: Path) -> list[str]:
    """The command line (instance and the problem's required flags) of a small instance of ``problem``."""
    shared = REPO.parent / "shared" / "benchmarks"
    if problem == "pipeline":
        return [str(REPO / "examples" / "tiny.json")]
    if problem == "strategy":
        return [str(shared / "strategy" / "alexnet_p4.json")]
    if problem == "placement":
        return [str(shared / "placement" / "example-1.json")]
    if problem == "joint":
        path = tmp_path / "joint.json"
        path.write_text(json.dumps(tiny()))
        return [str(path)]
    if problem == "hetero":
        return [str(shared / "hetero"), "--setting", "opt350-a8-v16"]
    assert problem == "galvatron"
    return [
        str(GALVATRON / "models" / "llama2-7b"),
        *("--hardware", str(GALVATRON / "hardware"), "--devices", "8", "--memory", "36GiB", "--global-batch", "16"),
    ]


class _Stop(Exception):
    pass


def _settings_seen(problem: str, flags: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run ``solve`` with ``flags`` up to the chain; the problem's own settings (its steps') and the chain's."""
    module = importlib.import_module(registry.problem(problem).solve.partition(":")[0])
    seen: dict[str, Any] = {}

    def spy(steps: Any, instance: Any, settings: Any, budget: Any = None) -> Any:
        seen.update(own=steps.settings, chain=settings)
        raise KeyboardInterrupt  # stop here: the CLI exits 130 without solving

    monkeypatch.setattr(module, "run_chain", spy)
    assert main(["solve", *_instance(problem, tmp_path), "--problem", problem, *flags]) == 130
    return seen


#: Each common flag, the settings field it sets and the value given.
COMMON_CASES = [
    (["--solver", "cbc"], "solver", "cbc"),
    (["--threads", "3"], "threads", 3),
    (["--seed", "7"], "seed", 7),
    (["--time-limit", "42"], "time_limit_s", 42.0),
    (["--no-warm-start"], "warm_start", False),
    (["--progress", "2.5"], "progress_interval_s", 2.5),
    (["--progress", "0"], "progress_interval_s", None),
]


@pytest.mark.parametrize("problem", list(registry.PROBLEMS))
@pytest.mark.parametrize(("flags", "field", "value"), COMMON_CASES, ids=lambda c: " ".join(c) if isinstance(c, list) else None)
def test_each_common_flag_reaches_the_search_or_is_refused(
    problem: str, flags: list[str], field: str, value: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    entry = registry.problem(problem)
    if field not in entry.common:
        assert main(["solve", *_instance(problem, tmp_path), "--problem", problem, *flags]) == 2
        err = capsys.readouterr().err
        assert f"the {problem} problem" in err and flags[0] in err and "Traceback" not in err
        return
    seen = _settings_seen(problem, flags, tmp_path, monkeypatch)
    assert isinstance(seen["own"], CommonSettings)
    assert getattr(seen["own"], field) == value
    assert getattr(seen["chain"], field) == value  # what the chain (its budget, the back-end) reads


@pytest.mark.parametrize("problem", list(registry.PROBLEMS))
def test_defaults_when_no_flag_is_given(problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = _settings_seen(problem, [], tmp_path, monkeypatch)["chain"]
    assert (chain.time_limit_s, chain.seed, chain.warm_start, chain.progress_interval_s) == (60.0, 0, True, 5.0)
    assert chain.solver == registry.problem(problem).solver_default


@pytest.mark.parametrize(
    ("problem", "field", "value"),
    [
        ("pipeline", "heuristics", False),
        ("strategy", "heuristics", False),
        ("placement", "heuristics", ()),
        ("joint", "baselines", False),
        ("galvatron", "heuristics", False),
    ],
)
def test_no_heuristics_reaches_each_problem(
    problem: str, field: str, value: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert getattr(_settings_seen(problem, [], tmp_path, monkeypatch)["own"], field) != value
    assert getattr(_settings_seen(problem, ["--no-heuristics"], tmp_path, monkeypatch)["own"], field) == value


class _Recorder:
    """A back-end that records what it was asked and finds nothing (the chain keeps the baselines' plan)."""

    name = "recorder"

    def __init__(self) -> None:
        self.params: list[SolveParams] = []

    def solve(self, model: Any, params: SolveParams) -> SolveOutput:
        self.params.append(params)
        return SolveOutput(SolveStatus.UNKNOWN)


@pytest.mark.parametrize("warm", [False, True])
def test_joint_seed_and_warm_start_reach_the_back_end(warm: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--seed 7 --no-warm-start`` on joint's slot model reaches CBC as seed 7, with no hint and no cutoff."""
    import milp_partition.chain as chain

    backend = _Recorder()
    asked: list[str] = []
    monkeypatch.setattr(chain, "get_backend", lambda name: asked.append(name) or backend)
    out = tmp_path / "r.json"
    flags = ["--method", "milp", "--solver", "cbc", "--seed", "7", "--threads", "3", "-q", "-o", str(out)]
    assert main(["solve", *_instance("joint", tmp_path), *flags, *([] if warm else ["--no-warm-start"])]) == 0
    assert asked == ["cbc"] and len(backend.params) == 1
    params = backend.params[0]
    assert (params.seed, params.threads, params.use_hint) == (7, 3, warm)
    result = json.loads(out.read_text())
    assert result["solver"] == "joint-milp/cbc"
    assert bool(result["warm_start"]) is warm  # the hint (the baselines' best plan) is recorded only when given
    assert (result["settings"]["seed"], result["settings"]["warm_start"]) == (7, warm)


@pytest.mark.skipif(not GALVATRON.is_dir(), reason="needs ../shared/benchmarks/galvatron")
@pytest.mark.parametrize("warm", [False, True])
def test_galvatron_warm_start_reaches_its_search(warm: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Galvatron's exact search starts from the uniform plan's value, or from nothing with ``--no-warm-start``; the
    answer is the same proven optimum."""
    import milp_partition.galvatron.solve as galvatron_solve

    real = galvatron_solve.search
    incumbents: list[float] = []

    def spy(problem: Any, incumbent: float, *args: Any, **kwargs: Any) -> Any:
        incumbents.append(incumbent)
        return real(problem, incumbent, *args, **kwargs)

    monkeypatch.setattr(galvatron_solve, "search", spy)
    out = tmp_path / "r.json"
    flags = ["-q", "-o", str(out), *([] if warm else ["--no-warm-start"])]
    assert main(["solve", *_instance("galvatron", tmp_path), *flags]) == 0
    assert len(incumbents) == 1 and math.isfinite(incumbents[0]) is warm
    result = json.loads(out.read_text())
    assert result["status"] == "optimal"
    assert result["objective"] == pytest.approx(1.08604612429421, rel=1e-9)  # the CLI's answer before this change


def test_no_control_flow_reads_the_solver_notes() -> None:
    """The stop reason is ``Result.stopped_by`` (and a back-end's ``SolveOutput.interrupted``), never a note: no
    condition or comparison in the package reads ``solver_notes`` (or a back-end's ``out.notes``).  At main before
    issue 41 this found eight places: exit 130, the sweep's stop, the nested chain's interrupt, the back-end's
    interrupt and four of the joint steps' decisions."""
    import ast

    found = []
    for folder in ("milp_partition", "formulations", "heuristics"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(parsed(path)):
                if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
                    tests = [node.test]
                elif isinstance(node, ast.comprehension):
                    tests = list(node.ifs)
                elif isinstance(node, ast.Compare):
                    tests = [node]
                else:
                    continue
                for part in (m for t in tests for m in ast.walk(t)):
                    notes = isinstance(part, ast.Attribute) and part.attr == "solver_notes"
                    backend = isinstance(part, ast.Attribute) and part.attr == "notes" and getattr(part.value, "id", "") == "out"
                    if notes or backend:
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, found
