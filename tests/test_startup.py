"""Start-up (issue 41, item 6): the command line's parser is built from the registry without importing solvers.

``milp-partition --version`` and ``--help`` were slow (2.8 s) because building the parser imported 152 of 172 modules:
every problem's CLI module, with its solver, and every further command's module.  Now the problems' options come
from light ``cli/<problem>_options.py`` modules and a further command's module is imported only when it runs.
Checked here by what building the parser imports (in a fresh interpreter), never by timing it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Modules that building the parser (and --help, --version) must not import: solvers, numeric and ML libraries, and
#: the project's problem, back-end, reader and result-writing modules.
HEAVY = (
    "ortools",
    "pulp",
    "highspy",
    "torch",
    "numpy",
    "scipy",
    "matplotlib",
    "onnx",
    "ray",
    # the back-ends' table (backends.registry, which the --solver choices and the settings read) imports no solver:
    # the interface and every back-end module are heavy
    "milp_partition.backends.base",
    "milp_partition.backends.model",
    "milp_partition.backends.cpsat",
    "milp_partition.backends.cbc",
    "milp_partition.backends.highs",
    "milp_partition.backends.ortools_direct",
    "milp_partition.chain",
    "milp_partition.io",
    "milp_partition.formulations",
    "milp_partition.heuristics",
    "milp_partition.verifiers",
    "milp_partition.sweep",
    "milp_partition.calibration",
    "milp_partition.importers",
    "milp_partition.cli.output",
    "milp_partition.cli.problem_commands",
)


def _modules_after(code: str) -> list[str]:
    """The modules loaded after running ``code`` in a fresh interpreter (SystemExit from --help is expected)."""
    script = f"import sys, json\ntry:\n    {code}\nexcept SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


@pytest.mark.parametrize(
    "code",
    [
        "from milp_partition.cli.dispatch import build_parser; build_parser('')",
        "from milp_partition.cli.dispatch import main; main(['--version'])",
        "from milp_partition.cli.dispatch import main; main(['--help'])",
        "from milp_partition.cli.dispatch import main; main(['solve', '--help'])",
        "from milp_partition.cli.dispatch import main; main(['evaluate', '--help'])",
    ],
)
def test_building_the_parser_imports_no_solver_and_no_problem_module(code: str) -> None:
    modules = _modules_after(code)
    assert "milp_partition.cli.dispatch" in modules  # the code ran
    assert not _heavy(modules), _heavy(modules)
    solves = [m for m in modules if m.startswith("milp_partition.") and m.endswith((".solve", ".problem", ".gap"))]
    assert not solves, solves


def test_a_command_imports_its_own_module_only() -> None:
    modules = _modules_after("from milp_partition.cli.dispatch import main; main(['plot', '--help'])")
    assert "milp_partition.cli.plot" in modules
    assert not {"milp_partition.cli.gap", "milp_partition.cli.calibrate", "milp_partition.cli.run"} & set(modules)


def test_the_listed_commands_are_those_their_modules_register() -> None:
    """``--help`` lists each further command with the help its module gives it (:data:`COMMANDS` repeats it)."""
    from milp_partition.cli.dispatch import COMMANDS, build_parser

    def listed(only: str | None) -> dict[str, str]:
        parser = build_parser(only)
        sub = next(a for a in parser._actions if a.dest == "command")
        return {a.dest: a.help for a in sub._choices_actions}  # type: ignore[attr-defined]

    full, light = listed(None), listed("")
    assert light == full
    assert set(COMMANDS) <= set(full)


def test_the_options_modules_name_what_the_problem_modules_use() -> None:
    """Names the light options modules repeat (so as not to import a problem module) equal the problems' own."""
    from milp_partition.heuristics.placement import PLACEMENT_HEURISTICS

    from milp_partition.cli.galvatron_options import SHIPPED_MODELS
    from milp_partition.cli.joint_options import DEFAULT_IMPORTED_MICROBATCHES
    from milp_partition.cli.placement_options import HEURISTIC_NAMES
    from milp_partition.io.galvatron import KNOWN_MODELS
    from milp_partition.joint.layers import DEFAULT_MICROBATCHES

    assert HEURISTIC_NAMES == tuple(PLACEMENT_HEURISTICS)
    assert DEFAULT_IMPORTED_MICROBATCHES == DEFAULT_MICROBATCHES
    assert SHIPPED_MODELS == tuple(KNOWN_MODELS)
    from milp_partition.cli.export_options import ENGINES
    from milp_partition.cli.joint_options import SPACES
    from milp_partition.io.export import EXPORTS
    from milp_partition.joint.space import SPACES as SPACES_OF_THE_SEARCH

    assert ENGINES == EXPORTS
    assert SPACES == SPACES_OF_THE_SEARCH


def test_version_and_help_still_answer(capsys) -> None:
    from milp_partition.cli.dispatch import main

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith("milp-partition ")
    with pytest.raises(SystemExit) as stop:
        main(["solve", "--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0 and "--time-limit" in out and "--tp-degrees" in out and "--hardware" in out
