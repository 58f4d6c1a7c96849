"""milp_partition: provably optimal (or provably near-optimal) partitioning of DNN training across GPUs.

The public API, importable from the package itself::

    from milp_partition import read_instance, PipelineProblem, solve_pipeline, SolveSettings, Status

    inst = read_instance("examples/bert24_training.json")
    result = solve_pipeline(PipelineProblem(inst.graph, inst.cluster), SolveSettings(time_limit_s=30))
    assert result.status is Status.OPTIMAL

Every name below is imported on first use (module ``__getattr__``), so ``import milp_partition`` stays cheap: it
imports neither OR-Tools nor PuLP nor torch.  ``docs/ARCHITECTURE.md`` says where each one lives and how a solve flows.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Top-level folders of the source tree that are the subpackages ``milp_partition.<folder>`` (the project card keeps
#: them top-level; an installed wheel holds them inside the package, pyproject.toml's package-dir).
_SOURCE_TREE_FOLDERS: tuple[str, ...] = ("formulations", "heuristics")


class _SourceTreeFolders(importlib.abc.MetaPathFinder):
    """Finds ``milp_partition.formulations`` / ``.heuristics`` in the source tree's top-level folders.

    Installed only when this package is imported from the source tree (the repository root is on ``sys.path``: a
    script, ``python -c``, ``python -m``, a Ray worker or a subprocess started there), whatever was installed: a
    regular install, an editable one or none.  Then the source tree and the installed package import the same names
    from the same files; an installed wheel (the folders inside the package) never installs it.
    """

    def __init__(self, folders: dict[str, str]) -> None:
        self.folders = folders  # full module name -> folder

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
        )


def _map_source_tree_folders() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    folders = {
        f"{__name__}.{name}": os.path.join(root, name)
        for name in _SOURCE_TREE_FOLDERS
        if not os.path.isdir(os.path.join(here, name)) and os.path.isfile(os.path.join(root, name, "__init__.py"))
    }
    if folders and not any(isinstance(f, _SourceTreeFolders) and f.folders == folders for f in sys.meta_path):
        sys.meta_path.append(_SourceTreeFolders(folders))


_map_source_tree_folders()

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    # results and errors
    "Result": "milp_partition.result",
    "Status": "milp_partition.result",
    "HeuristicRun": "milp_partition.result",
    "InputError": "milp_partition.errors",
    "MilpPartitionError": "milp_partition.errors",
    # the shared data model
    "Graph": "milp_partition.graph",
    "Node": "milp_partition.graph",
    "Edge": "milp_partition.graph",
    "make_graph": "milp_partition.graph",
    "Cluster": "milp_partition.cluster",
    "Device": "milp_partition.cluster",
    "Link": "milp_partition.cluster",
    "DeviceKind": "milp_partition.cluster",
    "homogeneous_cluster": "milp_partition.cluster",
    "one_kind_cluster": "milp_partition.cluster",
    "make_cluster": "milp_partition.cluster",
    "parse_bytes": "milp_partition.units",
    "parse_rate": "milp_partition.units",
    # readers and writers (io/)
    "read_instance": "milp_partition.io",
    "write_instance": "milp_partition.io",
    "read_cluster": "milp_partition.io",
    "read_strategy_tables": "milp_partition.io.strategy_tables",
    "write_strategy_tables": "milp_partition.io.strategy_tables",
    "read_placement_instance": "milp_partition.io.placement_instance",
    "write_placement_instance": "milp_partition.io.placement_instance",
    "read_joint": "milp_partition.io.piper",
    "write_joint": "milp_partition.io.piper",
    # pipeline partitioning
    "Instance": "milp_partition.pipeline.problem",
    "PipelineProblem": "milp_partition.pipeline.problem",
    "PipelineSettings": "milp_partition.pipeline.problem",
    "PipelineSolution": "milp_partition.pipeline.problem",
    "SolveSettings": "milp_partition.pipeline.solve",
    "CommonSettings": "milp_partition.settings",
    "solve_pipeline": "milp_partition.pipeline.solve",
    "verify_pipeline": "milp_partition.verifiers.pipeline",
    # layer-wise parallelization strategies
    "StrategyProblem": "milp_partition.strategy.problem",
    "StrategySolution": "milp_partition.strategy.problem",
    "StrategySolveSettings": "milp_partition.strategy.solve",
    "solve_strategy": "milp_partition.strategy.solve",
    "verify_strategy": "milp_partition.verifiers.strategy",
    "read_layer_graph": "milp_partition.strategy.layers",
    "StrategyGenerationSettings": "milp_partition.strategy.layers",
    "generate_strategy_problem": "milp_partition.strategy.layers",
    "MemoryModelSettings": "milp_partition.strategy.memory",
    "with_memory": "milp_partition.strategy.memory",
    # operator placement and scheduling
    "PlacementProblem": "milp_partition.placement.problem",
    "PlacementSettings": "milp_partition.placement.problem",
    "PlacementSolution": "milp_partition.placement.problem",
    "PlacementSolveSettings": "milp_partition.placement.solve",
    "solve_placement": "milp_partition.placement.solve",
    "placement_from_graph": "milp_partition.placement.convert",
    "placement_from_instance_file": "milp_partition.placement.convert",
    "verify_placement": "milp_partition.verifiers.placement",
    # joint planning (Piper's problem)
    "JointProblem": "milp_partition.joint.problem",
    "JointNode": "milp_partition.joint.problem",
    "JointEdge": "milp_partition.joint.problem",
    "JointConfig": "milp_partition.joint.problem",
    "joint_cluster": "milp_partition.joint.problem",
    "JointPlan": "milp_partition.joint.problem",
    "JointStage": "milp_partition.joint.problem",
    "JointSolveSettings": "milp_partition.joint.problem",
    "JointSchedule": "milp_partition.joint.schedule",
    "JointResult": "milp_partition.joint.solve",
    "solve_joint": "milp_partition.joint.solve",
    "verify_joint": "milp_partition.verifiers.joint",
    "LayerPlanSettings": "milp_partition.joint.layers",
    "joint_from_imported": "milp_partition.joint.layers",
    # model import (needs the torch extra; importing these names imports torch)
    "ImportSettings": "milp_partition.importers.settings",
    "import_torch_model": "milp_partition.importers.torch_import",
    "write_imported": "milp_partition.importers.build",
    # device profiles (calibration)
    "DeviceProfile": "milp_partition.calibration.profile",
    "resolve_profile": "milp_partition.calibration.profile",
    "apply_profile": "milp_partition.calibration.apply",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    """Import a public name on first use and cache it in the package's namespace."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'milp_partition' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# ruff: noqa: F401  (the names below are re-exported: __all__ lists them through _EXPORTS, which ruff cannot read)
if TYPE_CHECKING:  # what mypy and editors see; at run time __getattr__ imports these on demand
    from milp_partition.calibration.apply import apply_profile
    from milp_partition.calibration.profile import DeviceProfile, resolve_profile
    from milp_partition.cluster import Cluster, Device, DeviceKind, Link, homogeneous_cluster, make_cluster, one_kind_cluster
    from milp_partition.errors import InputError, MilpPartitionError
    from milp_partition.graph import Edge, Graph, Node, make_graph
    from milp_partition.importers.build import write_imported
    from milp_partition.importers.settings import ImportSettings
    from milp_partition.importers.torch_import import import_torch_model
    from milp_partition.io import read_cluster, read_instance, write_instance
    from milp_partition.io.piper import read_joint, write_joint
    from milp_partition.io.placement_instance import read_placement_instance, write_placement_instance
    from milp_partition.io.strategy_tables import read_strategy_tables, write_strategy_tables
    from milp_partition.joint.layers import LayerPlanSettings, joint_from_imported
    from milp_partition.joint.problem import (
        JointConfig,
        JointEdge,
        JointNode,
        JointPlan,
        JointProblem,
        JointSolveSettings,
        JointStage,
        joint_cluster,
    )
    from milp_partition.joint.solve import JointResult, solve_joint
    from milp_partition.pipeline.problem import Instance, PipelineProblem, PipelineSettings, PipelineSolution
    from milp_partition.pipeline.solve import SolveSettings, solve_pipeline
    from milp_partition.placement.convert import placement_from_graph, placement_from_instance_file
    from milp_partition.placement.problem import PlacementProblem, PlacementSettings, PlacementSolution
    from milp_partition.placement.solve import PlacementSolveSettings, solve_placement
    from milp_partition.result import HeuristicRun, Result, Status
    from milp_partition.strategy.layers import StrategyGenerationSettings, generate_strategy_problem, read_layer_graph
    from milp_partition.strategy.memory import MemoryModelSettings, with_memory
    from milp_partition.strategy.problem import StrategyProblem, StrategySolution
    from milp_partition.strategy.solve import StrategySolveSettings, solve_strategy
    from milp_partition.units import parse_bytes, parse_rate
    from milp_partition.verifiers.joint import verify_joint
    from milp_partition.verifiers.pipeline import verify_pipeline
    from milp_partition.verifiers.placement import verify_placement
    from milp_partition.verifiers.strategy import verify_strategy
