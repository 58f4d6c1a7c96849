"""The lines not to cross (../shared/DESIGN.md), checked on the source: imports flow one way, down the layers.

Every module of milp_partition (formulations/ and heuristics/ under their installed names
milp_partition.formulations and milp_partition.heuristics) has a layer in :data:`LAYERS`; a module
may import modules of its own layer or of a lower one, never of a higher one (function-local
imports included).  A layer is the module's, not its package's: a problem package holds its data
model (layer 2), its readers and instance builders (3), its exact methods and solving helpers (5),
its solve steps (6) and its gap sweep (7).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from tests.source_trees import parsed

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "milp_partition"
#: Top-level folders that install as milp_partition.<folder> (pyproject's package-dir).
MAPPED = ("formulations", "heuristics")

#: Module (or package: the entry covers its submodules) -> layer; the longest entry that covers a module gives its layer.
#: ``milp_partition`` itself covers only its __init__.  A problem package's own entry (its __init__, and any module
#: the table does not name) is layer 2, the lowest a problem module can have: a new module there that imports more
#: fails below until it gets its entry.
LAYERS: dict[str, int] = {
    # the package's __init__ is the public API (milp_partition/__init__.py): it re-exports, lazily, from every
    # layer, so it sits on top and no module of the project imports from it
    "milp_partition": 7,
    # 1: errors, units, result: nothing of the project below them
    "milp_partition.errors": 1,
    "milp_partition.units": 1,
    "milp_partition.result": 1,
    "milp_partition.budget": 1,  # the one time budget of a solve (chain.py makes it; every phase takes it)
    "milp_partition.settings": 2,  # the common settings (solver, time, threads, seed, warm start) of every problem
    "milp_partition.io.atomic": 1,  # the one atomic file writer (imports only errors): every file written goes through it
    # 2: data models: plain data and the Solution types, no solving
    "milp_partition.graph": 2,
    "milp_partition.cluster": 2,
    "milp_partition.pipeline": 2,
    "milp_partition.pipeline.problem": 2,
    "milp_partition.strategy": 2,
    "milp_partition.strategy.problem": 2,
    "milp_partition.placement": 2,
    "milp_partition.placement.problem": 2,
    "milp_partition.joint": 2,
    "milp_partition.joint.problem": 2,
    "milp_partition.joint.schedule": 2,  # the declared time schedule of the joint search's phases (plain data)
    "milp_partition.galvatron": 2,
    "milp_partition.galvatron.problem": 2,
    "milp_partition.hetero": 2,
    "milp_partition.hetero.problem": 2,
    # which solver back-ends exist and what each can do: a table of names (settings check their solver against it)
    "milp_partition.backends.registry": 2,
    # the one cost model of a step as run executes it: formulas and coefficients, plain data (verifiers read it)
    "milp_partition.costmodel": 2,
    # 3: inputs: io/ (one module per format, JSON helpers in io.json_text), model importers, device profiles and
    # calibration, and each problem's instance builders (generators, converters, cost models applied to a graph)
    "milp_partition.io": 3,
    "milp_partition.importers": 3,
    "milp_partition.calibration": 3,
    "milp_partition.pipeline.generators": 3,
    "milp_partition.placement.generators": 3,
    "milp_partition.placement.convert": 3,
    "milp_partition.strategy.layers": 3,
    "milp_partition.strategy.memory": 3,
    "milp_partition.strategy.dimensions": 3,
    "milp_partition.joint.generators": 3,
    "milp_partition.joint.layers": 3,
    "milp_partition.joint.run_layers": 3,  # the run-objective problem of an imported graph (costmodel.plan)
    "milp_partition.joint.run_split": 3,  # the tensor-parallel degrees run can split an imported model at
    "milp_partition.joint.megatron": 3,
    "milp_partition.joint.mixed_problem": 2,  # the joint problem on a cluster of kinds (data)
    "milp_partition.joint.mixed_layers": 3,  # its builder from an imported graph, one table per kind (reads the one Cluster)
    # 4: back-ends (variables and constraints, no problem) and independent verifiers (data models and io only)
    "milp_partition.backends": 4,
    "milp_partition.verifiers": 4,
    # 5: formulations, heuristics, each problem's exact methods and solving helpers (costs, bounds, reductions),
    # and the chain the solve steps plug into
    "milp_partition.formulations": 5,
    "milp_partition.heuristics": 5,
    "milp_partition.heuristics.joint_orders": 5,  # the exact DP along topological orders (graphs past the ideal cap)
    "milp_partition.chain": 5,
    "milp_partition.galvatron.costs": 5,
    "milp_partition.galvatron.dp": 5,
    "milp_partition.hetero.cost": 5,
    "milp_partition.hetero.search": 5,
    "milp_partition.hetero.pool": 5,  # the pooled relaxation (problem, links, lift)
    "milp_partition.hetero.pooled": 5,  # the pooled relaxation solved by the search
    "milp_partition.hetero.leaf": 5,  # a small leaf of the search priced plan by plan
    "milp_partition.hetero.native": 5,  # the search's inner loops in C (optional; numpy fallback)
    "milp_partition.hetero.regions": 5,  # a proven bound of the plans across two regions (not yet used by the solve)
    "milp_partition.pipeline.costs": 5,
    "milp_partition.placement.bounds": 5,
    "milp_partition.placement.decompose": 5,
    "milp_partition.placement.subgraph": 5,
    "milp_partition.placement.extend": 5,
    "milp_partition.placement.local_search": 5,
    "milp_partition.strategy.dp": 5,
    "milp_partition.strategy.pareto_dp": 5,
    "milp_partition.strategy.reductions": 5,
    "milp_partition.strategy.ties": 5,
    "milp_partition.joint.dp": 5,
    "milp_partition.joint.run_dp": 5,  # the exact DP of the run-objective plan (costmodel.plan)
    "milp_partition.joint.native": 5,
    "milp_partition.joint.knapsack": 5,
    "milp_partition.joint.mixed_dp": 5,  # the exact DP on a cluster of kinds
    "milp_partition.joint.segment_bound": 5,  # a proven bound without ideals (chain segments in pooled stage classes)
    "milp_partition.joint.stage_bound": 5,  # a proven bound without ideals (Lagrangian per stage sequence, GLOP)
    "milp_partition.joint.column_bound": 5,  # a proven bound without ideals (configuration LP over whole stages)
    # 6: each problem's solve steps
    "milp_partition.pipeline.solve": 6,
    "milp_partition.strategy.solve": 6,
    "milp_partition.placement.solve": 6,
    "milp_partition.joint.solve": 6,
    "milp_partition.galvatron.solve": 6,
    "milp_partition.hetero.solve": 6,
    "milp_partition.joint.mixed_solve": 6,  # the cluster of kinds' solve: DP, verifier, status
    "milp_partition.joint.space": 6,  # the joint search within a training engine's space (solve_joint per candidate)
    # 7: on top: command line, reports, plots, sweeps and each problem's gap sweep
    "milp_partition.__main__": 7,
    "milp_partition.registry": 7,  # one descriptor per problem: it names cli, solve, gap and plot modules
    "milp_partition.cli": 7,
    "milp_partition.run": 7,  # runs plans on torch.distributed: on top, beside the CLI
    "milp_partition.report": 7,
    "milp_partition.plots": 7,
    "milp_partition.sweep": 7,
    "milp_partition.pipeline.gap": 7,
    "milp_partition.strategy.gap": 7,
    "milp_partition.placement.gap": 7,
    "milp_partition.joint.gap": 7,
    "milp_partition.galvatron.gap": 7,
    "milp_partition.hetero.gap": 7,
}


def _module_name(path: Path) -> str:
    """The installed name of a source file (formulations/x.py -> milp_partition.formulations.x)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in MAPPED:
        parts.insert(0, "milp_partition")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    """Every module of the project: installed name -> file."""
    files = [*PKG.rglob("*.py"), *(p for folder in MAPPED for p in (ROOT / folder).rglob("*.py"))]
    return {_module_name(f): f for f in files if "__pycache__" not in f.parts}


MODULES = _sources()


def layer_of(module: str) -> int | None:
    """The layer of a module: its longest entry in :data:`LAYERS` (``None`` when none covers it)."""
    best = None
    for key in LAYERS:
        covers = module == key or (key != "milp_partition" and module.startswith(key + "."))
        if covers and (best is None or len(key) > len(best)):
            best = key
    return None if best is None else LAYERS[best]


def _first_party_imports(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a project module, at any depth (function-local imports included)."""
    tree = parsed(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "milp_partition"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "milp_partition":
                continue
            # ``from package import submodule`` imports the submodule
            out += [(node.lineno, f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base) for a in node.names]
    return out


def upward_imports(modules: dict[str, Path]) -> list[str]:
    """Every import of a module from a higher layer than the importer's."""
    bad = []
    for module, path in sorted(modules.items()):
        own = layer_of(module)
        for line, target in _first_party_imports(module, path):
            theirs = layer_of(target)
            if own is not None and theirs is not None and theirs > own:
                bad.append(f"{_shown(path)}:{line}: {module} (layer {own}) imports {target} (layer {theirs})")
    return sorted(set(bad))


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in MODULES if layer_of(m) is None)
    assert not missing, f"give these modules a layer in LAYERS: {missing}"


def test_every_layer_entry_names_a_module() -> None:
    stale = sorted(k for k in LAYERS if k not in MODULES)
    assert not stale, f"LAYERS entries that match no module: {stale}"


def test_imports_go_down_the_layers() -> None:
    bad = upward_imports(MODULES)
    assert not bad, "\n".join(bad)


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The check itself: a data model that imports a formulation, inside a function, is reported."""
    planted = tmp_path / "problem.py"
    planted.write_text("def f():\n    from milp_partition.formulations import joint\n    return joint\n")
    bad = upward_imports({"milp_partition.joint.problem": planted})
    assert len(bad) == 1, bad
    assert "milp_partition.joint.problem (layer 2) imports milp_partition.formulations.joint (layer 5)" in bad[0]


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("milp_partition.joint.problem", 2),
        ("milp_partition.io.piper", 3),
        ("milp_partition.joint.layers", 3),
        ("milp_partition.verifiers.joint", 4),
        ("milp_partition.formulations.joint", 5),
        ("milp_partition.heuristics.joint_baselines", 5),
        ("milp_partition.heuristics.joint_orders", 5),
        ("milp_partition.joint.dp", 5),
        ("milp_partition.joint.segment_bound", 5),
        ("milp_partition.joint.stage_bound", 5),
        ("milp_partition.joint.column_bound", 5),
        ("milp_partition.joint.knapsack", 5),
        ("milp_partition.joint.solve", 6),
        ("milp_partition.joint.gap", 7),
        ("milp_partition.cli.joint", 7),
    ],
)
def test_joint_problem_layers(module: str, layer: int) -> None:
    assert module in MODULES
    assert layer_of(module) == layer


# ---------------------------------------------------------------------------------------------------------------------
# Lines within the layers
# ---------------------------------------------------------------------------------------------------------------------


def _offenders(modules: list[str], forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for module in modules:
        path = MODULES[module]
        for _line, target in _first_party_imports(module, path):
            if any(target == p or target.startswith(p + ".") for p in forbidden):
                bad.append(f"{path.relative_to(ROOT)} imports {target}")
    return bad


def _under(prefix: str) -> list[str]:
    return sorted(m for m in MODULES if m == prefix or m.startswith(prefix + "."))


SOLVE_SIDE = (
    "milp_partition.formulations",
    "milp_partition.heuristics",
    "milp_partition.chain",
    "milp_partition.pipeline.costs",
    *(f"milp_partition.{p}.{m}" for p in ("pipeline", "strategy", "placement", "joint") for m in ("solve", "dp")),
)


def test_verifiers_import_no_formulation_heuristic_or_chain() -> None:
    bad = _offenders(_under("milp_partition.verifiers"), SOLVE_SIDE)
    assert not bad, bad


#: The one module of backends/ that data models may read: the table of back-end names and capabilities (no solver).
BACKEND_NAMES_TABLE = "milp_partition.backends.registry"


def test_data_model_and_io_import_no_solver_side() -> None:
    modules = [m for m in MODULES if (layer_of(m) or 0) <= 3]
    bad = [b for b in _offenders(modules, (*SOLVE_SIDE, "milp_partition.backends")) if not b.endswith(BACKEND_NAMES_TABLE)]
    bad += [
        f"{MODULES[m].relative_to(ROOT)} imports {t}"
        for m in modules
        for t in _root_imports(MODULES[m])
        if t in ("ortools", "pulp")
    ]
    assert not bad, bad


def _root_imports(path: Path) -> set[str]:
    """The top-level package of every import of a file, at any depth."""
    tree = parsed(path)
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    return names


#: Solver packages: only backends/ imports them (issue 41: every call into a solver goes through the registry's back-ends).
SOLVER_PACKAGES = ("ortools", "pulp", "highspy")


def test_no_module_outside_backends_imports_a_solver() -> None:
    bad = sorted(
        f"{MODULES[m].relative_to(ROOT)} imports {t}"
        for m in MODULES
        if not m.startswith("milp_partition.backends.")
        for t in _root_imports(MODULES[m])
        if t in SOLVER_PACKAGES
    )
    assert not bad, bad


def test_the_backend_table_imports_nothing_above_errors() -> None:
    """Data models import it: it must stay a table (no back-end module, no solver)."""
    imports = {t for _, t in _first_party_imports(BACKEND_NAMES_TABLE, MODULES[BACKEND_NAMES_TABLE])}
    assert imports <= {"milp_partition.errors"}, imports
    assert not _root_imports(MODULES[BACKEND_NAMES_TABLE]) & set(SOLVER_PACKAGES)


def test_backends_know_no_problem() -> None:
    problems = ("milp_partition.pipeline", "milp_partition.strategy", "milp_partition.placement", "milp_partition.joint")
    bad = _offenders(_under("milp_partition.backends"), (*problems, *SOLVE_SIDE))
    assert not bad, bad


def _files(*parts: str) -> list[Path]:
    base = ROOT.joinpath(*parts)
    return sorted(base.rglob("*.py")) if base.is_dir() else [base]


def test_no_top_level_formulations_or_heuristics_imports() -> None:
    """formulations/ and heuristics/ install only as milp_partition.formulations / milp_partition.heuristics."""
    files = [*_files("milp_partition"), *_files("formulations"), *_files("heuristics"), *_files("tests"), *_files("benchmarks")]
    bad = []
    for f in files:
        bad += [f"{f.relative_to(ROOT)} imports {m}" for m in _root_imports(f) if m in MAPPED]
    assert not bad, bad


def test_no_symlinks_in_the_package_folders() -> None:
    links = [p for folder in ("milp_partition", *MAPPED) for p in [ROOT / folder, *(ROOT / folder).rglob("*")] if p.is_symlink()]
    assert not links, links


def test_pyproject_maps_formulations_and_heuristics_and_lists_every_package() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {f"milp_partition.{folder}": folder for folder in MAPPED}
    on_disk = {_module_name(p) for p in MODULES.values() if p.name == "__init__.py"}
    assert on_disk == set(setuptools["packages"]), sorted(on_disk ^ set(setuptools["packages"]))


OPTIONAL_DEPENDENCIES = ("torch", "onnx", "onnxscript", "matplotlib", "ray", "cupy", "transformers")


def _needs_optional(module: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether importing ``module`` imports an optional dependency (at any module's top level, transitively)."""
    if module.split(".")[0] in OPTIONAL_DEPENDENCIES:
        return True
    path = MODULES.get(module)
    if path is None or module in seen:
        return False
    tree = parsed(path)
    tops = [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names]
    tops += [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module]
    return any(_needs_optional(m, seen | {module}) for m in tops)


# Modules that import each other and cannot both import at the top (a cycle); one side stays lazy.
LAZY_FOR_A_CYCLE = {
    ("milp_partition/calibration/profile.py", "milp_partition.calibration.datasheets"),
    # search() picks the C pass (a subclass of dp.JointDP) where it applies
    ("milp_partition/joint/dp.py", "milp_partition.joint.native"),
}


def test_first_party_imports_at_module_top() -> None:
    """Function-local imports of our own modules only where the module pulls an optional dependency (or breaks a cycle)."""
    bad = []
    for f in sorted(MODULES.values()):
        rel = str(f.relative_to(ROOT))
        tree = parsed(f)
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for n in ast.walk(fn):
                if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("milp_partition"):
                    if not _needs_optional(n.module) and (rel, n.module) not in LAZY_FOR_A_CYCLE:
                        bad.append(f"{rel}:{n.lineno} imports {n.module} inside {fn.name}()")
    assert not bad, sorted(set(bad))
