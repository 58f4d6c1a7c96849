"""The lines not to cross (../shared/DESIGN.md), checked on the source: imports flow one way."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "milp_partition"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-local imports included)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _files(*parts: str) -> list[Path]:
    base = ROOT.joinpath(*parts)
    return sorted(base.rglob("*.py")) if base.is_dir() else [base]


def _offenders(files: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for f in files:
        for mod in _imports(f):
            if any(mod == p or mod.startswith(p + ".") for p in forbidden):
                bad.append(f"{f.relative_to(ROOT)} imports {mod}")
    return bad


SOLVE_SIDE = (
    "milp_partition.formulations",
    "milp_partition.heuristics",
    "formulations",
    "heuristics",
    "milp_partition.chain",
    "milp_partition.pipeline.solve",
    "milp_partition.strategy.solve",
    "milp_partition.placement.solve",
)


def test_verifiers_import_no_formulation_heuristic_or_chain() -> None:
    bad = _offenders(_files("milp_partition", "verifiers"), (*SOLVE_SIDE, "milp_partition.pipeline.costs"))
    assert not bad, bad


def test_data_model_and_io_import_no_solver_side() -> None:
    files = [PKG / "graph.py", PKG / "cluster.py", PKG / "pipeline" / "problem.py", PKG / "strategy" / "problem.py"]
    files += [PKG / "placement" / "problem.py", *_files("milp_partition", "io")]
    bad = _offenders(files, (*SOLVE_SIDE, "milp_partition.backends", "ortools", "pulp"))
    assert not bad, bad


def test_backends_know_no_problem() -> None:
    problems = ("milp_partition.pipeline", "milp_partition.strategy", "milp_partition.placement", "milp_partition.joint")
    bad = _offenders(_files("milp_partition", "backends"), (*problems, *SOLVE_SIDE))
    assert not bad, bad


def test_no_top_level_formulations_or_heuristics_imports() -> None:
    files = [*_files("milp_partition"), *_files("formulations"), *_files("heuristics"), *_files("tests"), *_files("benchmarks")]
    bad = []
    for f in files:
        if f.is_symlink() or any(p.is_symlink() for p in f.parents if p != ROOT and ROOT in p.parents):
            continue
        bad += [f"{f.relative_to(ROOT)} imports {m}" for m in _imports(f) if m.split(".")[0] in ("formulations", "heuristics")]
    assert not bad, bad


def test_packages_listed_in_pyproject_cover_every_package() -> None:
    """find_packages does not follow the formulations/heuristics links, so the list is explicit: keep it whole."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in PKG.rglob("__init__.py") if "__pycache__" not in p.parts}
    on_disk |= {"milp_partition.formulations", "milp_partition.heuristics"}
    assert on_disk <= listed, sorted(on_disk - listed)
    assert (PKG / "formulations").resolve() == (ROOT / "formulations").resolve()
    assert (PKG / "heuristics").resolve() == (ROOT / "heuristics").resolve()


OPTIONAL_DEPENDENCIES = ("torch", "onnx", "onnxscript", "matplotlib", "ray", "cupy", "transformers")


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _needs_optional(module: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether importing ``module`` imports an optional dependency (at any module's top level, transitively)."""
    if module.split(".")[0] in OPTIONAL_DEPENDENCIES:
        return True
    path = _module_file(module) if module.startswith("milp_partition") else None
    if path is None or module in seen:
        return False
    tree = ast.parse(path.read_text())
    tops = [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names]
    tops += [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module]
    return any(_needs_optional(m, seen | {module}) for m in tops)


# Modules that import each other and cannot both import at the top (a cycle); one side stays lazy.
LAZY_FOR_A_CYCLE = {("milp_partition/calibration/profile.py", "milp_partition.calibration.datasheets")}


def test_first_party_imports_at_module_top() -> None:
    """Function-local imports of our own modules only where the module pulls an optional dependency (or breaks a cycle)."""
    bad = []
    for f in _files("milp_partition"):
        rel = str(f.relative_to(ROOT))
        if rel.startswith(("milp_partition/formulations/", "milp_partition/heuristics/")):
            continue  # the links: checked below through formulations/ and heuristics/
        bad += _local_first_party(f, rel)
    for f in [*_files("formulations"), *_files("heuristics")]:
        bad += _local_first_party(f, str(f.relative_to(ROOT)))
    assert not bad, sorted(set(bad))


def _local_first_party(f: Path, rel: str) -> list[str]:
    out = []
    tree = ast.parse(f.read_text())
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for n in ast.walk(fn):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("milp_partition"):
                if not _needs_optional(n.module) and (rel, n.module) not in LAZY_FOR_A_CYCLE:
                    out.append(f"{rel}:{n.lineno} imports {n.module} inside {fn.name}()")
    return out
